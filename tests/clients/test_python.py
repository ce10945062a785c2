#!/usr/bin/python3
"""keygate with a real client: redis-py (Debian's python3-redis) through keygate.

tests/clients/run starts two TLS redis-servers and keygate, then runs this file with
Debian's /usr/bin/python3 and these variables set:

  KG_PORT                            keygate on 127.0.0.1 (plain RESP2, no AUTH)
  KG_CACHE_PORT   KG_CACHE_PASS      the cache backend's plain port and password
  KG_DURABLE_PORT KG_DURABLE_PASS    the durable backend's plain port and password

The direct connections (plain port + password) check what really landed on each
backend: the TTL keygate injected, and that a key went to one instance only.

A test that fails because keygate mishandles what redis-py sends says so in its
message, starting with "KEYGATE BUG:". The last line printed is
`python: N passed, M failed`.
"""
import os
import sys
import threading
import unittest
import uuid

import redis

PORT = int(os.environ["KG_PORT"])
CACHE_PORT = int(os.environ["KG_CACHE_PORT"])
CACHE_PASS = os.environ["KG_CACHE_PASS"]
DURABLE_PORT = int(os.environ["KG_DURABLE_PORT"])
DURABLE_PASS = os.environ["KG_DURABLE_PASS"]

# Keys of one run never collide with another run's (the backends are fresh anyway).
RUN = uuid.uuid4().hex[:8]


def keygate(**kw):
    kw.setdefault("socket_timeout", 10)
    kw.setdefault("socket_connect_timeout", 5)
    return redis.Redis(host="127.0.0.1", port=PORT, **kw)


def direct(name):
    port, password = (CACHE_PORT, CACHE_PASS) if name == "cache" else (DURABLE_PORT, DURABLE_PASS)
    return redis.Redis(host="127.0.0.1", port=port, password=password, socket_timeout=10)


class Base(unittest.TestCase):
    def setUp(self):
        self.r = keygate()
        self.cache = direct("cache")
        self.durable = direct("durable")

    def tearDown(self):
        for c in (self.r, self.cache, self.durable):
            c.close()
        self.r.connection_pool.disconnect()

    def key(self, ns, name):
        return f"{ns}py:{RUN}:{self.id().rsplit('.', 1)[-1]}:{name}"


class TestConnect(Base):
    def test_ping(self):
        self.assertTrue(self.r.ping())

    def test_echo(self):
        self.assertEqual(self.r.echo("hello keygate"), b"hello keygate")
        self.assertEqual(self.r.echo(b"\x00\xff\r\n"), b"\x00\xff\r\n")

    def test_client_setname_getname(self):
        self.assertTrue(self.r.client_setname("py-worker-1"))
        self.assertEqual(self.r.client_getname(), "py-worker-1")

    def test_client_name_on_connect(self):
        # redis-py sends CLIENT SETNAME right after connecting when client_name is given.
        r = keygate(client_name="py-on-connect", decode_responses=True)
        try:
            self.assertTrue(r.ping())
            self.assertEqual(r.client_getname(), "py-on-connect")
        finally:
            r.close()

    def test_select_0_on_connect(self):
        # db=0 sends nothing; an explicit SELECT 0 must be OK (keygate answers it).
        self.assertTrue(self.r.execute_command("SELECT", 0))

    def test_connect_handshake_client_setinfo(self):
        # redis-py >= 5 sends CLIENT SETINFO LIB-NAME/LIB-VER on connect and ignores an error;
        # Debian 12's 4.3.4 does not, so send it by hand: OK, or the reply Redis 7.0 gives
        # (SETINFO is 7.2+). Either way the connection must stay usable.
        try:
            reply = self.r.execute_command("CLIENT", "SETINFO", "LIB-NAME", "redis-py")
            self.assertIn(reply, (True, b"OK"))
        except redis.exceptions.ResponseError as e:
            self.assertIn("unknown subcommand", str(e).lower())
        self.assertTrue(self.r.ping())

    def test_hello_2(self):
        reply = self.r.execute_command("HELLO", "2")
        self.assertIsInstance(reply, list)
        fields = dict(zip(reply[0::2], reply[1::2]))
        self.assertEqual(fields.get(b"proto"), 2, reply)
        self.assertTrue(self.r.ping())

    def test_hello_4_refused(self):  # HELLO 3 switches to RESP3 (test_node_resp3.mjs, test_resp3)
        with self.assertRaises(redis.exceptions.ResponseError) as cm:
            self.r.execute_command("HELLO", "4")
        self.assertTrue(str(cm.exception).startswith("NOPROTO"), str(cm.exception))
        self.assertTrue(self.r.ping())

    def test_info_parses(self):
        # KEYGATE BUG when this fails with ValueError: redis-py's INFO parser splits each
        # `field:value` line, and a value holding ',' and '=' must be `k=v,k=v,...`.
        try:
            info = self.r.info()
        except ValueError as e:
            self.fail(
                "KEYGATE BUG: r.info() (INFO with no section) raises "
                f"ValueError({e}) in redis-py's parse_info: a line of keygate's INFO "
                "`# Namespaces` section such as `namespace:cache:,instance=cache,ttl=1h,...` "
                "has a value with ',' and '=' whose first item `cache:` is not `k=v`; "
                "expected every line `name:scalar` or `name:k=v,k=v` with a unique name"
            )
        self.assertIn("redis_version", info)
        self.assertIn("keygate_version", info)
        self.assertIsInstance(info.get("connected_clients"), int)

    def test_info_server_section(self):
        info = self.r.info("server")
        self.assertIn("redis_version", info)
        self.assertEqual(info.get("redis_mode"), "standalone")


class TestKeys(Base):
    def test_set_get_cache_ttl_injected(self):
        k = self.key("cache:", "x")
        self.assertTrue(self.r.set(k, "1"))
        self.assertEqual(self.r.get(k), b"1")
        ttl = self.cache.ttl(k)
        self.assertTrue(0 < ttl <= 3600, f"TTL on the cache backend is {ttl}, want (0, 3600]")
        self.assertEqual(self.durable.exists(k), 0, "a cache: key landed on durable")

    def test_set_with_own_ttl_kept(self):
        k = self.key("cache:", "own")
        self.assertTrue(self.r.set(k, "v", ex=120))
        ttl = self.cache.ttl(k)
        self.assertTrue(0 < ttl <= 120, ttl)

    def test_set_get_q_durable_no_ttl(self):
        k = self.key("q:", "run")
        self.assertTrue(self.r.set(k, "payload"))
        self.assertEqual(self.r.get(k), b"payload")
        self.assertEqual(self.durable.get(k), b"payload")
        self.assertEqual(self.durable.ttl(k), -1, "q: is ttl=none")
        self.assertEqual(self.cache.exists(k), 0, "a q: key landed on cache")

    def test_nonamespace(self):
        with self.assertRaises(redis.exceptions.ResponseError) as cm:
            self.r.set("nope:py", "1")
        self.assertEqual(str(cm.exception), "NONAMESPACE key 'nope:py' matches no namespace in the registry")
        with self.assertRaises(redis.exceptions.ResponseError) as cm:
            self.r.get("nope:py")
        self.assertTrue(str(cm.exception).startswith("NONAMESPACE "), str(cm.exception))
        self.assertEqual(self.cache.exists("nope:py") + self.durable.exists("nope:py"), 0)
        self.assertTrue(self.r.ping(), "the connection must stay usable after an error")

    def test_hset_hgetall(self):
        k = self.key("cache:", "h")
        self.assertEqual(self.r.hset(k, mapping={"a": "1", "b": "2", "c": "3"}), 3)
        self.assertEqual(self.r.hgetall(k), {b"a": b"1", b"b": b"2", b"c": b"3"})
        self.assertEqual(self.r.hget(k, "b"), b"2")
        self.assertEqual(self.r.hincrby(k, "a", 5), 6)
        ttl = self.cache.ttl(k)
        self.assertTrue(
            0 < ttl <= 3600,
            f"KEYGATE BUG: HSET {k} a 1 b 2 c 3 through keygate left TTL {ttl} on the cache backend; "
            "DESIGN.md section 2 (ttl=D): every key written through keygate ends the command with a "
            "TTL in (0, max-ttl], expected (0, 3600] (README's 'first cut' injects only for SET)",
        )

    def test_hset_durable(self):
        k = self.key("q:", "h")
        self.assertEqual(self.r.hset(k, "f", "v"), 1)
        self.assertEqual(self.r.hgetall(k), {b"f": b"v"})
        self.assertEqual(self.durable.hgetall(k), {b"f": b"v"})

    def test_binary_values(self):
        every_byte = bytes(range(256))
        values = [every_byte, b"", b"\r\n", b"*1\r\n$4\r\nPING\r\n", b"\x00" * 1000, os.urandom(1 << 20)]
        for i, v in enumerate(values):
            k = self.key("cache:", f"bin{i}")
            self.assertTrue(self.r.set(k, v))
            self.assertEqual(self.r.get(k), v, f"value {i} ({len(v)} bytes) changed through keygate")
            self.assertEqual(self.cache.get(k), v)

    def test_binary_key(self):
        k = self.key("cache:", "").encode() + b"\x00\xff\r\n key"
        self.assertTrue(self.r.set(k, b"v"))
        self.assertEqual(self.r.get(k), b"v")
        self.assertEqual(self.cache.get(k), b"v")

    def test_unicode(self):
        k = self.key("cache:", "ключ-🔑")
        self.assertTrue(self.r.set(k, "значение ✓"))
        self.assertEqual(self.r.get(k).decode(), "значение ✓")

    def test_mget_one_instance(self):
        ks = [self.key("cache:", f"m{i}") for i in range(5)]
        self.r.mset({k: str(i) for i, k in enumerate(ks)})
        self.assertEqual(self.r.mget(ks), [str(i).encode() for i in range(5)])

    def test_backend_error_passed_through(self):
        k = self.key("cache:", "wrongtype")
        self.r.set(k, "s")
        with self.assertRaises(redis.exceptions.ResponseError) as cm:
            self.r.lpush(k, "x")
        self.assertTrue(str(cm.exception).startswith("WRONGTYPE"), str(cm.exception))


class TestPipeline(Base):
    def test_pipeline_1000_mixed_in_order(self):
        p = self.r.pipeline(transaction=False)
        expected = []
        for i in range(1000):
            kc = self.key("cache:", f"p{i}")
            kq = self.key("q:", f"p{i // 4}")
            op = i % 4
            if op == 0:
                p.set(kc, f"c{i}")
                expected.append(True)
            elif op == 1:
                p.set(kq, f"q{i}")
                expected.append(True)
            elif op == 2:
                p.get(self.key("cache:", f"p{i - 2}"))
                expected.append(f"c{i - 2}".encode())
            else:
                p.get(kq)
                expected.append(f"q{i - 2}".encode())
        got = p.execute()
        self.assertEqual(len(got), 1000)
        for i, (g, e) in enumerate(zip(got, expected)):
            self.assertEqual(g, e, f"pipeline reply {i} out of order")

    def test_pipeline_incr_counts_in_order(self):
        kc, kq = self.key("cache:", "n"), self.key("q:", "n")
        p = self.r.pipeline(transaction=False)
        for _ in range(500):
            p.incr(kc)
            p.incr(kq)
        got = p.execute()
        want = [n for i in range(1, 501) for n in (i, i)]
        self.assertEqual(got, want)
        self.assertEqual(self.cache.get(kc), b"500")
        self.assertEqual(self.durable.get(kq), b"500")

    def test_pipeline_error_in_its_slot(self):
        k = self.key("cache:", "e")
        p = self.r.pipeline(transaction=False)
        p.set(k, "1")
        p.get("nope:pipe")
        p.get(k)
        got = p.execute(raise_on_error=False)
        self.assertEqual(got[0], True)
        self.assertIsInstance(got[1], redis.exceptions.ResponseError)
        self.assertTrue(str(got[1]).startswith("NONAMESPACE"), str(got[1]))
        self.assertEqual(got[2], b"1")


class TestTransactions(Base):
    """redis-py's default pipeline is a transaction: MULTI, the commands, EXEC, in one write.
    DESIGN.md section 4: keygate pins the client to a backend connection for MULTI...EXEC."""

    def test_transaction_pipeline(self):
        k = self.key("cache:", "tx")
        try:
            got = self.r.pipeline().set(k, "1").incr(k).get(k).execute()
        except redis.exceptions.RedisError as e:
            self.fail(
                f"KEYGATE BUG: r.pipeline() (MULTI / SET / INCR / GET / EXEC in one write) raised "
                f"{type(e).__name__}: {e}; expected [True, 2, b'2'] (DESIGN.md section 4: MULTI pins a "
                f"backend connection). The key now holds {self.cache.get(k)!r}: "
                "the commands must not run outside the transaction"
            )
        self.assertEqual(got, [True, 2, b"2"])
        ttl = self.cache.ttl(k)
        self.assertTrue(0 < ttl <= 3600, f"TTL after a transactional SET is {ttl}")

    def test_watch_transaction(self):
        k = self.key("q:", "watched")
        self.r.set(k, "10")

        def add_one(pipe):
            value = int(pipe.get(k))
            pipe.multi()
            pipe.set(k, value + 1)

        try:
            self.r.transaction(add_one, k)
        except redis.exceptions.RedisError as e:
            self.fail(
                f"KEYGATE BUG: r.transaction() (WATCH {k} / GET / MULTI / SET / EXEC) raised "
                f"{type(e).__name__}: {e}; expected it to commit (DESIGN.md section 4: WATCH pins)"
            )
        self.assertEqual(self.durable.get(k), b"11")


class TestIntrospection(Base):
    def test_client_list(self):
        clients = self.r.client_list()
        self.assertTrue(any(c.get("cmd") == "client|list" for c in clients), clients)
        for c in clients:
            self.assertIn("id", c)
            self.assertIn("addr", c)

    def test_client_info_parses(self):
        # redis-py's parse_client_info turns these CLIENT INFO fields into ints; Redis 7.0
        # always sends them (networking.c), so a reply without them raises KeyError.
        try:
            info = self.r.client_info()
        except KeyError as e:
            raw = self.r.execute_command("CLIENT", "INFO")
            self.fail(
                f"KEYGATE BUG: r.client_info() raises KeyError({e}): keygate's CLIENT INFO reply "
                f"{raw!r} lacks fields Redis 7.0 always sends and redis-py parses as int: "
                "id age idle db sub psub multi qbuf qbuf-free obl argv-mem oll omem tot-mem"
            )
        self.assertEqual(info["db"], 0)
        self.assertGreater(info["id"], 0)

    def test_scan_iter_match_in_namespace(self):
        base = self.key("cache:", "scan")
        for i in range(50):
            self.r.set(f"{base}:{i}", i)
        try:
            found = {k.decode() for k in self.r.scan_iter(match=f"{base}:*", count=10)}
        except redis.exceptions.ResponseError as e:
            self.fail(
                f"KEYGATE BUG: SCAN 0 MATCH {base}:* COUNT 10 -> {e}; DESIGN.md section 3 refuses only "
                "SCAN without a MATCH inside one allowed namespace, so this one goes to cache"
            )
        self.assertEqual(found, {f"{base}:{i}" for i in range(50)})


class TestPool(Base):
    def test_pool_many_threads(self):
        # 16 threads share 8 connections: BlockingConnectionPool waits for a free one.
        pool = redis.BlockingConnectionPool(
            host="127.0.0.1", port=PORT, max_connections=8, timeout=30, socket_timeout=10
        )
        r = redis.Redis(connection_pool=pool)
        errors = []
        per_thread = 200

        def work(t):
            try:
                for i in range(per_thread):
                    ns = "cache:" if i % 2 == 0 else "q:"
                    k = f"{ns}py:{RUN}:pool:{t}:{i}"
                    v = f"{t}-{i}"
                    if not r.set(k, v):
                        errors.append(f"thread {t}: SET {k} failed")
                    got = r.get(k)
                    if got != v.encode():
                        errors.append(f"thread {t}: GET {k} = {got!r}, want {v!r}")
                    if r.incr(f"cache:py:{RUN}:pool:counter") < 1:
                        errors.append("INCR went backwards")
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(f"thread {t}: {type(e).__name__}: {e}")

        threads = [threading.Thread(target=work, args=(t,)) for t in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        try:
            self.assertFalse(any(t.is_alive() for t in threads), "a thread hung")
            self.assertEqual(errors, [])
            self.assertEqual(int(r.get(f"cache:py:{RUN}:pool:counter")), 16 * per_thread)
            self.assertLessEqual(len(pool._connections), 8)
        finally:
            pool.disconnect()


class TestStartUp(Base):
    """Issue 13: the commands clients send at start-up, RESET and the keyless commands, through redis-py."""

    def errors(self):
        # keygate's own error replies (INFO stats errors_*): a start-up command it refused counts there
        return sum(v for k, v in self.r.info("stats").items() if k.startswith("errors_"))

    def raw(self, r, *args):
        # one command on one pooled connection, without redis-py's reply callbacks
        # (PING's turns a message into False, COMMAND's cannot read COMMAND DOCS)
        if r.connection:  # single_connection_client: its one connection
            r.connection.send_command(*args)
            return r.connection.read_response()
        conn = r.connection_pool.get_connection(args[0])
        try:
            conn.send_command(*args)
            return conn.read_response()
        finally:
            r.connection_pool.release(conn)

    def test_start_up_commands_answer_without_error(self):
        before = self.errors()
        # redis-py sends CLIENT SETNAME on connect for client_name (SELECT only for a db other than 0)
        r = keygate(client_name="py-start", single_connection_client=True)
        try:
            self.assertTrue(r.ping())
            self.assertEqual(r.client_getname(), "py-start")
            # redis-py >= 5 sends these on connect; Debian 12's 4.3.4 does not, so by hand
            self.assertEqual(self.raw(r, "CLIENT", "SETINFO", "LIB-NAME", "redis-py"), b"OK")
            self.assertEqual(self.raw(r, "CLIENT", "SETINFO", "LIB-VER", redis.__version__), b"OK")
            self.assertTrue(r.execute_command("SELECT", 0))
            self.assertEqual(self.raw(r, "READONLY"), b"OK")  # what cluster clients send
            self.assertEqual(self.raw(r, "READWRITE"), b"OK")
            self.assertEqual(r.echo("start"), b"start")
            self.assertEqual(self.raw(r, "PING", "hello"), b"hello")
            self.assertEqual(r.info("server").get("redis_mode"), "standalone")
            docs = self.raw(r, "COMMAND", "DOCS", "GET")
            self.assertEqual(docs[0], b"get")
            self.assertEqual(docs, self.raw(self.durable, "COMMAND", "DOCS", "GET"))
        finally:
            r.close()
        self.assertEqual(self.errors(), before, "a start-up command got an error from keygate")

    def test_client_no_evict_and_no_touch_refused_with_a_reason(self):
        for sub in ("NO-EVICT", "NO-TOUCH"):
            with self.assertRaises(redis.exceptions.ResponseError) as cm:
                self.raw(self.r, "CLIENT", sub, "ON")
            self.assertTrue(str(cm.exception).startswith("DENIED"), str(cm.exception))
        self.assertTrue(self.r.ping())

    def test_reset(self):
        r = keygate(client_name="py-reset", single_connection_client=True)
        try:
            k = self.key("q:", "reset")
            pipe = r.pipeline(transaction=False)
            pipe.execute_command("MULTI")
            pipe.set(k, "queued")
            pipe.execute()
            self.assertEqual(self.raw(r, "RESET"), b"RESET")
            self.assertIsNone(r.client_getname())
            with self.assertRaises(redis.exceptions.ResponseError) as cm:
                r.execute_command("EXEC")
            self.assertIn("EXEC without MULTI", str(cm.exception))
            self.assertIsNone(r.get(k))
            self.assertTrue(r.ping())
        finally:
            r.close()

    def test_keyless_commands(self):
        self.r.set(self.key("q:", "k"), "1")
        self.r.set(self.key("cache:", "k"), "1")
        self.assertEqual(self.r.dbsize(), self.durable.dbsize() + self.cache.dbsize())
        self.assertLessEqual(abs(self.r.time()[0] - self.durable.time()[0]), 1)
        self.assertEqual(self.r.lastsave(), self.durable.lastsave())
        self.assertEqual(self.r.wait(0, 0), 0)
        for refused in ("RANDOMKEY", "FLUSHDB"):
            with self.assertRaises(redis.exceptions.ResponseError) as cm:
                self.r.execute_command(refused)
            self.assertTrue(str(cm.exception).startswith("DENIED"), str(cm.exception))


if __name__ == "__main__":
    runner = unittest.TextTestRunner(verbosity=2, stream=sys.stdout)
    result = runner.run(unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__]))
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    passed = result.testsRun - failed - len(result.skipped)
    print(f"python: {passed} passed, {failed} failed", flush=True)
    sys.exit(0 if failed == 0 else 1)
