// Boost.Asio and Boost.Beast, as every rankd file includes them: through this header only.
//
// Asio reads and writes into as many buffers a call as IOV_MAX allows (1,024 on Linux), but its
// headers do not include <climits>, and where IOV_MAX is not in sight it assumes 16: a W1 body's 53
// tensors then took four receives instead of one (docs/log/benchmarks.md, "HTTP bodies read in
// fewer calls"). Asio's templates are instantiated in each file that uses them, so the files must
// agree; one header that includes <climits> first is how they do.
#pragma once

#include <climits>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast.hpp>
#include <boost/beast/ssl.hpp>

static_assert(boost::asio::detail::max_iov_len >= 64, "Boost.Asio included before <climits> (frontend/asio.h)");
