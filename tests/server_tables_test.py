"""Tables served from other tiers: keyed tables and tables on disk, over HTTP.

  /usr/bin/python3 tests/server_tables_test.py RANKD_BINARY SOURCE_DIR
"""
import copy
import os
import shutil
import sys
import tempfile
import time
import unittest

from serving_harness import Server, lines, rel_error, scrape, ZOO


class KeyedTableTest(unittest.TestCase):
    """DLRM served as it is and with its first table keyed (tables.keyed, a folder of HugeCTR's key and
    emb_vector files beside the config): keys whose vectors are zeros, and unknown keys (the default
    row, zeros), score as an empty bag does on the plain model; a key with a row of ones does not; the
    unknown keys are counted in /metrics."""

    ZERO_KEYS = [1 << 40, 7]
    ONES_KEY = 123456789012

    @classmethod
    def setUpClass(cls):
        import struct
        cls.repo = tempfile.mkdtemp()
        shutil.copytree(os.path.join(ZOO, "dlrm_dcnv2"), os.path.join(cls.repo, "dlrm_dcnv2"))
        keyed = os.path.join(cls.repo, "dlrm_keyed")
        shutil.copytree(os.path.join(ZOO, "dlrm_dcnv2"), keyed)
        with open(os.path.join(keyed, "config.yaml")) as f:
            config = f.read().replace("name: dlrm_dcnv2", "name: dlrm_keyed")
        config += "tables:\n  keyed:\n    tables.0.weight: {path: sparse/t0}\n"
        with open(os.path.join(keyed, "config.yaml"), "w") as f:
            f.write(config)
        os.makedirs(os.path.join(keyed, "sparse", "t0"))
        keys = cls.ZERO_KEYS + [cls.ONES_KEY]
        with open(os.path.join(keyed, "sparse", "t0", "key"), "wb") as f:
            f.write(struct.pack("<%dq" % len(keys), *keys))
        with open(os.path.join(keyed, "sparse", "t0", "emb_vector"), "wb") as f:
            f.write(struct.pack("<24f", *([0.0] * 16 + [1.0] * 8)))
        cls.server = Server(cls.repo)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.repo)

    def score(self, model, sparse_0):
        request = copy.deepcopy(lines("dlrm_dcnv2", "requests")[0])
        for i in request["inputs"]:
            if i["name"] == "sparse_0":
                i["data"] = [sparse_0]
        status, body = self.server.json("POST", "/v2/models/%s/infer" % model, request)
        self.assertEqual(status, 200, body)
        return body["outputs"][0]["data"]

    def test_keys_read_their_rows_and_unknown_keys_the_default_row(self):
        empty = self.score("dlrm_dcnv2", [])
        self.assertLess(rel_error(self.score("dlrm_keyed", self.ZERO_KEYS), empty), 1e-6)
        self.assertLess(rel_error(self.score("dlrm_keyed", [999, 1 << 50, 1 << 50]), empty), 1e-6)
        self.assertGreater(rel_error(self.score("dlrm_keyed", [self.ONES_KEY]), empty), 1e-4)
        metrics = scrape(self.server)
        self.assertEqual(
            metrics['rankd_keyed_table_unknown_keys{model="dlrm_keyed",version="1",table="tables.0.weight"}'], 3)


class DiskTableTest(unittest.TestCase):
    """DLRM served with every table on disk (tables.tiers: disk, copies written into tables.disk_dir
    and unlinked at once, a host cache of one row each): every request of the zoo's file scores as
    on the model with its tables in memory, over HTTP from another process; an id out of range fails
    its own request; /metrics counts the rows read from the files."""

    @classmethod
    def setUpClass(cls):
        cls.repo = tempfile.mkdtemp()
        shutil.copytree(os.path.join(ZOO, "dlrm_dcnv2"), os.path.join(cls.repo, "dlrm_dcnv2"))
        on_disk = os.path.join(cls.repo, "dlrm_disk")
        shutil.copytree(os.path.join(ZOO, "dlrm_dcnv2"), on_disk)
        with open(os.path.join(on_disk, "config.yaml")) as f:
            config = f.read().replace("name: dlrm_dcnv2", "name: dlrm_disk")
        config += "tables:\n  disk_dir: rows\n  disk_cache_mb: 0\n  tiers:\n"
        config += "".join("    tables.%d.weight: disk\n" % t for t in range(26))
        with open(os.path.join(on_disk, "config.yaml"), "w") as f:
            f.write(config)
        os.makedirs(os.path.join(on_disk, "rows"))
        cls.rows = os.path.join(on_disk, "rows")
        cls.server = Server(cls.repo)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.repo)

    def test_scores_as_in_memory_and_counts_the_rows_read(self):
        self.assertEqual(os.listdir(self.rows), [])
        for request in lines("dlrm_dcnv2", "requests"):
            status, want = self.server.json("POST", "/v2/models/dlrm_dcnv2/infer", request)
            self.assertEqual(status, 200, want)
            status, got = self.server.json("POST", "/v2/models/dlrm_disk/infer", request)
            self.assertEqual(status, 200, got)
            self.assertEqual(got["outputs"][0]["data"], want["outputs"][0]["data"])
        bad = copy.deepcopy(lines("dlrm_dcnv2", "requests")[0])
        for i in bad["inputs"]:
            if i["name"] == "sparse_0":
                i["data"] = [[1 << 40] for _ in i["data"]]
        status, body = self.server.json("POST", "/v2/models/dlrm_disk/infer", bad)
        self.assertEqual(status, 400, body)
        self.assertIn("out of range", body["error"])
        metrics = scrape(self.server)
        label = '{model="dlrm_disk",version="1",table="tables.0.weight"}'
        self.assertGreater(metrics["rankd_table_disk_rows_read" + label], 0)
        self.assertEqual(metrics["rankd_table_disk_cache_capacity_rows" + label], 1)
        # One row and the policy's bookkeeping, whose sketch is 4 KiB at the least.
        self.assertGreater(metrics["rankd_table_disk_cache_host_bytes" + label], 4096)
        reads = '{model="dlrm_disk",version="1",table="tables.0.weight"'
        self.assertGreater(metrics["rankd_table_disk_read_seconds_count" + label], 0)
        self.assertEqual(metrics["rankd_table_disk_read_seconds_bucket" + reads + ',le="+Inf"}'],
                         metrics["rankd_table_disk_read_seconds_count" + label])
        self.assertLessEqual(metrics["rankd_table_disk_read_seconds_bucket" + reads + ',le="0.001"}'],
                             metrics["rankd_table_disk_read_seconds_bucket" + reads + ',le="1"}'])
        self.assertEqual(metrics['rankd_table_bytes{model="dlrm_disk",version="1",tier="disk"}'], 26 * 1000 * 8 * 4)


class DiskHotnessRestartTest(unittest.TestCase):
    """DLRM with every table on disk and tables.hotness_snapshot: the server stopped by SIGTERM saves
    its host caches' rows (FILE.disk); started again, its caches move them back in (counted in
    /metrics) and the same requests score as before without reading a row from the files."""

    def test_a_restarted_server_starts_with_the_rows_it_held(self):
        repo = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, repo)
        on_disk = os.path.join(repo, "dlrm_disk")
        shutil.copytree(os.path.join(ZOO, "dlrm_dcnv2"), on_disk)
        snapshot = os.path.join(repo, "dlrm.hot")
        with open(os.path.join(on_disk, "config.yaml")) as f:
            config = f.read().replace("name: dlrm_dcnv2", "name: dlrm_disk")
        config += "tables:\n  disk_dir: rows\n  disk_cache_mb: 1\n  hotness_snapshot: %s\n  tiers:\n" % snapshot
        config += "".join("    tables.%d.weight: disk\n" % t for t in range(26))
        with open(os.path.join(on_disk, "config.yaml"), "w") as f:
            f.write(config)
        os.makedirs(os.path.join(on_disk, "rows"))
        label = '{model="dlrm_disk",version="1",table="tables.0.weight"}'

        def score_all(server):
            scores = []
            for request in lines("dlrm_dcnv2", "requests"):
                status, body = server.json("POST", "/v2/models/dlrm_disk/infer", request)
                self.assertEqual(status, 200, body)
                scores.append(body["outputs"][0]["data"])
            return scores

        first = Server(repo)
        try:
            want = score_all(first)
            held = scrape(first)["rankd_table_disk_cache_rows" + label]
            self.assertGreater(held, 0)
            self.assertFalse(os.path.exists(snapshot + ".disk"))  # saved when the tables go
        finally:
            self.assertEqual(first.stop(), 0, first.output())
        self.assertTrue(os.path.exists(snapshot + ".disk"), first.output())

        second = Server(repo)
        try:
            metrics = scrape(second)
            for _ in range(200):  # the warm start runs beside the serving
                if metrics["rankd_table_disk_cache_rows" + label] >= held:
                    break
                time.sleep(0.05)
                metrics = scrape(second)
            # Moved in from the snapshot (a row the load's own warm-up read first is cached already).
            self.assertGreaterEqual(metrics["rankd_table_disk_cache_rows" + label], held)
            self.assertGreater(metrics["rankd_table_disk_cache_warmed" + label], held // 2)
            read = metrics["rankd_table_disk_rows_read" + label]
            self.assertEqual(score_all(second), want)
            self.assertEqual(scrape(second)["rankd_table_disk_rows_read" + label], read)
        finally:
            self.assertEqual(second.stop(), 0, second.output())


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
