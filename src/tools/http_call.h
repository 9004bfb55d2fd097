// One blocking HTTP/1.1 exchange with a server, for the control calls a tool makes around its load
// (`rankd bench server --protocol http --shared-memory system`: a model's metadata, registering and
// unregistering a region). Not for load: that is http_load_generator.cc's.
#pragma once

#include <string>

#include "rankd/status.h"

namespace rankd {

struct HttpAnswer {
  int status = 0;
  std::string body;
};

// Sends VERB TARGET with `body` (JSON, or nothing) to host:port on a new connection and reads the
// answer, within `timeout_seconds` in all. Fails (Unavailable) only when no answer came; an answer
// of any status is returned.
StatusOr<HttpAnswer> HttpCall(const std::string& host, int port, const std::string& verb, const std::string& target,
                              const std::string& body, double timeout_seconds = 10);

}  // namespace rankd
