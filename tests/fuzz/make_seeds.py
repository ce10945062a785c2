#!/usr/bin/env python3
"""make_seeds.py: writes the seed corpora tests/fuzz/corpus/<target>/ from readable cases.

Run from the repository root: python3 tests/fuzz/make_seeds.py (it rewrites fuzz_policy/, fuzz_resp/,
fuzz_reply/ and fuzz_config/; files whose names start with "crash_" are findings kept as regressions
and survive the rewrite).
Each fuzz_policy seed spells an exact session and argv in the input format fuzz_policy.c decodes
(argv as raw-byte arguments); the issue10_* seeds reproduce the findings of issue 10.
"""
import os
import shutil

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

# Distinct owners of conf/registry.conf in registry order (entries sorted by kind, prefix):
# bit d of the owner mask keeps OWNERS[d].
OWNERS = ["auth-security", "cache", "mattermost", "lifecycle", "slack", "telegram", "harvester",
          "runs", "queues", "rate-limit", "notifications"]


def session_bytes(mode="open", in_multi=False, multi=-1, watch=-1, owners=None, ro=False,
                  scripts=False, subscribed=False):
    """The four session bytes: mode is open (no users), unauth (users, no AUTH yet) or user."""
    want_mode = {"open": 0, "unauth": 1, "user": 2}[mode]
    for s0 in range(256):
        if s0 & 3 != want_mode or (s0 >> 2) & 1 != int(in_multi):
            continue
        if in_multi and (s0 >> 3) % 3 - 1 != multi:
            continue
        if (s0 >> 5) % 3 - 1 != watch:
            continue
        break
    else:
        raise ValueError("no session byte")
    all_owners = owners is None or owners == "*"
    s1 = (1 if all_owners else 0) | (2 if ro else 0) | (4 if scripts else 0) | (0x80 if subscribed else 0)
    mask = 0
    if not all_owners:
        for o in owners:
            mask |= 1 << OWNERS.index(o)
    return bytes([s0, s1, mask & 0xFF, mask >> 8])


def policy_input(argv, registry=None, **session):
    """session bytes, registry choice (repo, or `registry` bytes of a fuzzed one), argv as raw arguments."""
    out = bytearray(session_bytes(**session))
    if registry is None:
        out.append(0)
    else:
        out.append(3)
        out += registry
    out.append(len(argv) - 1)  # arguments after the name
    out += bytes([0, 0, 15])   # command index 0 (no subcommand), name spelled raw
    for i, arg in enumerate(argv):
        if isinstance(arg, str):
            arg = arg.encode()
        assert len(arg) < 48, arg
        if i > 0:
            out.append(9)      # a raw argument
        out.append(len(arg))
        out += arg
    return bytes(out)


# The pieces fuzz_policy.c builds a fuzzed registry from (gen_prefixes, gen_ttls, gen_max, gen_owners).
GEN_PREFIXES = ["a:", "a:b:", "a", "b:", "q:", "cache:", "cache:x", "push:", "ab", "x", "a:b:c"]
GEN_TTLS = ["none", "1s", "10m", "1h", "7d"]
GEN_MAX = [None, "1h", "7d"]
GEN_OWNERS = ["o1", "o2", "o3"]


def registry(*entries):
    """Bytes of a fuzzed registry: entries of (kind, prefix, instance, ttl, max_ttl, owner, sliding[, report]).
    kind "default" is the default line (its prefix is ignored); report=True adds enforce=report."""
    out = bytearray([len(entries) - 1])
    for entry in entries:
        kind, prefix, instance, ttl, max_ttl, owner, sliding = entry[:7]
        report = len(entry) > 7 and entry[7]
        kind_bits = {"channel": 7, "default": 6}.get(kind)
        # fuzz_policy.c reads the fields with overlapping modulos: search the bytes that decode right
        a = next(a for a in range(256) if (a & 7 == kind_bits if kind_bits else a & 7 < 6) and
                 (kind == "default" or GEN_PREFIXES[(a >> 3) % len(GEN_PREFIXES)] == prefix) and
                 bool(a & 0x80) == sliding)
        b = next(b for b in range(256) if ["durable", "cache"][b & 1] == instance and
                 GEN_OWNERS[(b >> 1) % 3] == owner and GEN_TTLS[(b >> 3) % 5] == ttl and
                 GEN_MAX[(b >> 6) % 3] == max_ttl and (((b >> 3) & 7) >= 5) == bool(report))
        out += bytes([a, b])
    return bytes(out)


CACHE = dict(mode="user", owners=["cache"])
SCRIPTS = dict(mode="user", owners="*", scripts=True)
LUA_SET = "return redis.call('SET',KEYS[1],'1')"
INT64_MIN = "-9223372036854775808"

POLICY = {
    # the findings of issue 10 (each must make the oracle abort until it is fixed)
    "issue10_item1_georadius_store_last_nonamespace": ["GEORADIUS", "cache:geo", "15", "37", "200", "km", "STORE", "cache:ok", "STORE", "nope:evil"],
    "issue10_item1_georadius_store_last_wrong_instance": ["GEORADIUS", "cache:geo", "15", "37", "200", "km", "STORE", "cache:ok", "STORE", "q:x"],
    "issue10_item1_georadius_store_last_other_owner": (["GEORADIUS", "cache:geo", "15", "37", "200", "km", "STORE", "cache:ok", "STORE", "cache:mattermost:listener"], CACHE),
    "issue10_item1_georadiusbymember_storedist_last": ["GEORADIUSBYMEMBER", "cache:geo", "m", "200", "km", "STOREDIST", "cache:ok", "STOREDIST", "nope:evil"],
    "issue10_item1_set_ex_ex": ["SET", "cache:a", "v", "EX", "10", "EX", "99999999"],
    "issue10_item1_set_px_px": ["SET", "cache:a", "v", "px", "10", "PX", "99999999999"],
    "issue10_item1_set_exat_exat": ["SET", "cache:a", "v", "EXAT", "1700000010", "exat", "1800000000"],
    "issue10_item1_set_pxat_pxat": ["SET", "cache:a", "v", "PXAT", "1700000010000", "PxAt", "1800000000000"],
    "issue10_item1_getex_ex_ex": ["GETEX", "cache:a", "EX", "10", "EX", "99999999"],
    "issue10_item2_georadius_store_nul": ["GEORADIUS", "cache:geo", "15", "37", "200", "km", b"STORE\0", "nope:nul"],
    "issue10_item2_copy_db_nul": ["COPY", "q:a", "q:b", b"DB\0", "1"],
    "issue10_item2_xread_block_nul": ["XREAD", b"BLOCK\0", "0", "STREAMS", "cache:s", "$"],
    "issue10_item3_xreadgroup_group_streams": ["XREADGROUP", "GROUP", "STREAMS", "c", "BLOCK", "0", "STREAMS", "q:s", ">"],
    "issue10_item4_pubsub_channels_owner": (["PUBSUB", "CHANNELS"], CACHE),
    "issue10_item4_pubsub_shardchannels_owner": (["PUBSUB", "SHARDCHANNELS"], CACHE),
    "issue10_item4_pubsub_numpat_owner": (["PUBSUB", "NUMPAT"], CACHE),
    "issue10_item5_eval_declared_key_ttl": ([ "EVAL", LUA_SET, "1", "cache:e"], SCRIPTS),
    "issue10_item5_fcall_declared_key_ttl": (["FCALL", "f", "1", "cache:e"], SCRIPTS),
    "issue10_item7_pubsub_numsub_no_channel": ["PUBSUB", "NUMSUB"],
    "issue10_item7_pubsub_shardnumsub_no_channel": ["PUBSUB", "SHARDNUMSUB"],
    "issue10_item10_pexpireat_int64_min": ["PEXPIREAT", "cache:k", INT64_MIN],
    "issue10_item10_set_pxat_int64_min": ["SET", "cache:k", "v", "PXAT", INT64_MIN],
    "issue10_item14_keys_in_multi": (["KEYS", "q:*"], dict(in_multi=True, multi=1)),
    "issue10_item14_scan_in_multi": (["SCAN", "0", "MATCH", "q:*"], dict(in_multi=True, multi=1)),
    # ordinary commands: starting points for the mutations
    "set_plain": ["SET", "cache:a", "v"],
    "set_nx_get": ["set", "cache:a", "v", "NX", "GET"],
    "set_keepttl": ["SET", "rl:a", "1", "KEEPTTL"],
    "set_ex_ok": ["SET", "cache:a", "v", "EX", "60"],
    "hset_wrap": ["HSET", "cache:h", "f", "v"],
    "mset_split": ["MSET", "cache:a", "1", "q:b", "2"],
    "mget_split": ["MGET", "cache:a", "q:b", "cache:c"],
    "del_split": ["DEL", "cache:a", "q:b"],
    "get_sliding": ["GET", "telegram:active-conv:1"],
    "expire_ok": ["EXPIRE", "cache:a", "60", "NX"],
    "expire_above_max": ["EXPIRE", "cache:a", "99999999"],
    "setex_above_max": ["SETEX", "cache:a", "99999999", "v"],
    "psetex_int64_max": ["PSETEX", "lock:a", "9223372036854775807", "v"],
    "persist_ttl_ns": ["PERSIST", "cache:a"],
    "getex_persist": ["GETEX", "cache:a", "PERSIST"],
    "rename_cap": ["RENAME", "q:a", "cache:mattermost:listener"],
    "copy_db0": ["COPY", "cache:a", "cache:b", "DB", "0", "REPLACE"],
    "georadius_store_once": ["GEORADIUS", "cache:geo", "15", "37", "200", "km", "COUNT", "2", "STORE", "cache:ok"],
    "sort_store_last": ["SORT", "cache:l", "LIMIT", "0", "1", "STORE", "cache:a", "STORE", "cache:b"],
    "sort_by_pattern": ["SORT", "cache:l", "BY", "cache:w_*", "GET", "#"],
    "sort_get_other_owner": (["SORT", "cache:l", "GET", "cache:mattermost:listener*"], CACHE),
    "blpop_block": ["BLPOP", "cache:never", "0"],
    "xread_block": ["XREAD", "COUNT", "1", "BLOCK", "0", "STREAMS", "cache:s", "$"],
    "xreadgroup_noack": ["XREADGROUP", "GROUP", "g", "c", "NOACK", "STREAMS", "q:s", ">"],
    "wait": ["WAIT", "0", "0"],
    "watch_pin": (["WATCH", "cache:w"], dict(watch=1)),
    "multi_ping": (["PING"], dict(in_multi=True, multi=-1)),
    "multi_pubsub_numsub_no_channel": (["PUBSUB", "NUMSUB"], dict(in_multi=True, multi=0)),
    "multi_set_other_instance": (["SET", "q:a", "v"], dict(in_multi=True, multi=1)),
    "unwatch_pinned": (["UNWATCH"], dict(watch=0)),
    "subscribe": ["SUBSCRIBE", "push:a", "push:b"],
    "psubscribe": ["PSUBSCRIBE", "push:*"],
    "unsubscribe_all": (["UNSUBSCRIBE"], dict(subscribed=True)),
    "publish_ro": (["PUBLISH", "push:a", "m"], dict(mode="user", owners="*", ro=True)),
    "subscribed_get": (["GET", "cache:a"], dict(subscribed=True)),
    "unauth_get": (["GET", "cache:a"], dict(mode="unauth")),
    "keys_owner": (["KEYS", "cache:*"], CACHE),
    "scan_no_match": ["SCAN", "0", "COUNT", "10"],
    "script_load": (["SCRIPT", "LOAD", LUA_SET], SCRIPTS),
    "eval_zero_keys": (["EVAL", LUA_SET, "0"], SCRIPTS),
    "zunionstore": ["ZUNIONSTORE", "cache:d", "2", "cache:a", "cache:b", "WEIGHTS", "1", "2"],
    "lmpop": ["LMPOP", "2", "q:a", "q:b", "LEFT", "COUNT", "01"],
    "select_1": ["SELECT", "1"],
    "flushall": ["FLUSHALL"],
    "client_setname": ["CLIENT", "SETNAME", "x"],
    "ro_hset": (["HSET", "q:h", "f", "v"], dict(mode="user", owners="*", ro=True)),
    # a fuzzed registry: nested a: / a:b: on both instances, a sliding one, a channel
    "fuzzed_registry_set": (["SET", "a:b:x", "v"], dict(registry=registry(
        ("namespace", "a:b:", "cache", "1s", None, "o3", False),
        ("namespace", "a:", "durable", "1s", None, "o1", True),
        ("channel", "push:", "durable", "none", None, "o1", False)))),
    # found by fuzz_policy: COPY/RENAME into a ttl=none namespace with a max-ttl carry the source's TTL uncapped
    "fuzz_copy_into_ttl_none_max_ttl": (["COPY", "a:b:cx", "a:x"], dict(registry=registry(
        ("namespace", "a:", "cache", "none", "1h", "o2", False),
        ("namespace", "a:b:c", "cache", "1s", None, "o2", False)))),
    "fuzz_renamenx_into_ttl_none_max_ttl": (["RENAMENX", "a:b:cx", "a:x"], dict(registry=registry(
        ("namespace", "a:", "cache", "none", "1h", "o2", False),
        ("namespace", "a:b:c", "cache", "1s", None, "o2", False)))),
    "fuzz_rename_into_ttl_none_max_ttl": (["RENAME", "a:b:cx", "a:x"], dict(registry=registry(
        ("namespace", "a:", "cache", "none", "1h", "o2", False),
        ("namespace", "a:b:c", "cache", "1s", None, "o2", False)))),
}

# issue 13: the default line and report mode (user FIRST keeps the fuzzed registry's first owner only)
FIRST = dict(mode="user", owners=[OWNERS[0]])
REPORT_REG = registry(("namespace", "a:", "durable", "1h", None, "o1", False),
                      ("namespace", "b:", "cache", "1h", "1h", "o2", False, True),
                      ("channel", "push:", "cache", "none", None, "o1", False),
                      ("default", "", "cache", "10m", "1h", "o1", False))
DEFAULT_REPORT_REG = registry(("namespace", "a:", "durable", "1h", None, "o1", False),
                              ("default", "", "cache", "10m", None, "o2", False, True))
POLICY.update({
    "issue13_default_set": (["SET", "zz", "v"], dict(registry=REPORT_REG)),
    "issue13_default_mset_cross": (["MSET", "zz", "v", "a:x", "v"], dict(registry=REPORT_REG)),
    "issue13_default_publish": (["PUBLISH", "zz", "m"], dict(registry=REPORT_REG)),
    "issue13_default_psubscribe": (["PSUBSCRIBE", "zz*"], dict(registry=REPORT_REG)),
    "issue13_default_psubscribe_reaches_push": (["PSUBSCRIBE", "p*"], dict(registry=REPORT_REG)),
    "issue13_report_set": (["SET", "b:x", "v"], dict(registry=REPORT_REG)),
    "issue13_report_hset": (["HSET", "b:x", "f", "v"], dict(registry=REPORT_REG)),
    "issue13_report_expire_above_max": (["EXPIRE", "b:x", "99999999"], dict(registry=REPORT_REG)),
    "issue13_report_persist": (["PERSIST", "b:x"], dict(registry=REPORT_REG)),
    "issue13_report_rename_cross": (["RENAME", "a:x", "b:y"], dict(registry=REPORT_REG)),
    "issue13_report_rename_cross_enforced_wins": (["RENAME", "b:y", "a:x"], dict(registry=REPORT_REG)),
    "issue13_report_noperm": (["GET", "b:x"], dict(registry=REPORT_REG, **FIRST)),
    "issue13_report_noperm_mget": (["MGET", "a:x", "b:x"], dict(registry=REPORT_REG, **FIRST)),
    "issue13_default_report_set": (["SET", "zz", "v"], dict(registry=DEFAULT_REPORT_REG, **FIRST)),
    "issue13_default_report_sunionstore": (["SUNIONSTORE", "a:d", "zz", "a:s"], dict(registry=DEFAULT_REPORT_REG)),
})

RESP = {
    "inline_ping": b"PING\r\n",
    "inline_quoted": b'SET "a b" \'c\\\'d\' "\\x41\\n"\r\n',
    "multibulk_set": b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n",
    "pipeline": b"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n",
    "empty_array": b"*0\r\n*-1\r\n",
    "bulk_nul": b"*2\r\n$4\r\nECHO\r\n$3\r\na\0b\r\n",
    "bad_len": b"*1\r\n$-5\r\nx\r\n",
    "huge_len": b"*1\r\n$99999999999999999999\r\n",
    "lf_only": b"PING\nECHO x\n",
    "reply_nested": b"*2\r\n*1\r\n:1\r\n$3\r\nabc\r\n+OK\r\n-ERR x\r\n$-1\r\n",
    "reply_deep": b"*1\r\n" * 70 + b":0\r\n",
    "reply_null_array": b"*-1\r\n:12345\r\n",
}

# fuzz_reply: streams of backend replies (the target prefixes a flags byte and a split point).
# Each D* name is one of the documented differences between keygate's framer and hiredis 0.14.
BIG = b"x" * 3000
REPLY = {
    "status_error_int": b"+OK\r\n-ERR unknown command 'x'\r\n:0\r\n:-9223372036854775808\r\n:9223372036854775807\r\n",
    "bulk_nil_empty": b"$-1\r\n$0\r\n\r\n$3\r\na\rb\r\n$5\r\n\r\n\r\n\0\r\n",
    "bulk_large": b"$3000\r\n" + BIG + b"\r\n+OK\r\n",
    "array_nested": b"*3\r\n*2\r\n:1\r\n$1\r\na\r\n*-1\r\n*0\r\n*1\r\n+x\r\n",
    "exec_reply": b"*4\r\n+OK\r\n:1\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n*-1\r\n",
    "scan_reply": b"*2\r\n$1\r\n0\r\n*3\r\n$5\r\ncache\r\n$4\r\nq:ab\r\n$0\r\n\r\n",
    "depth8_hiredis_limit": b"*1\r\n" * 8 + b":0\r\n+OK\r\n",
    "D6_depth9": b"*1\r\n" * 9 + b":0\r\n",
    "D6_depth300_lua": b"*1\r\n" * 300 + b"$2\r\nok\r\n",
    "D6_depth9_nil": b"*1\r\n" * 8 + b"*-1\r\n",
    "lone_cr_lf_in_line": b"+a\rb\nc\r\n-x\r\r\n",
    "partial_header": b"*2\r\n$10\r\nabc",
    "bad_type": b"+OK\r\n?x\r\n",
    "nul_type": b"\0\r\n",
    "bad_bulk_len": b"$05\r\nabcde\r\n",
    "bad_bulk_neg": b"$-2\r\n",
    "bad_bulk_minus0": b"$-0\r\n",
    "bad_array_len": b"*1a\r\n",
    "bad_array_neg": b"*-5\r\n:1\r\n",
    "array_int_max": b"*2147483647\r\n:1\r\n",
    "D5_array_above_int_max": b"*2147483648\r\n:1\r\n",
    "bulk_llong_max_minus2": b"$9223372036854775805\r\nabc",
    "D7_pending_above_llong_max": b"*4611686018427387905\r\n*4611686018427387905\r\n:1\r\n",
    "pending_llong_max": b"*4611686018427387904\r\n*4611686018427387904\r\n:1\r\n",
    "D4_bulk_llong_max": b"$9223372036854775807\r\n",
    "D3_bulk_no_crlf": b"$1\r\naXY:1\r\n",
    "D2_int_junk": b":12a\r\n",
    "D2_int_plus": b":+1\r\n",
    "D2_int_empty": b":\r\n",
    "D1_resp3_null": b"*2\r\n_\r\n:1\r\n",
    "D1_resp3_map": b"%1\r\n+a\r\n#t\r\n",
    "D1_resp3_push": b">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n=5\r\ntxt:x\r\n",
}

# fuzz_config: byte 0 is the mode (1: keygate.conf, \x01, registry.conf; 0: registry.conf alone).
# The target's folder holds secrets/ok.pass (0600), secrets/open.pass (0644), secrets/empty.pass.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def repo_file(rel):
    with open(os.path.join(REPO, rel), "rb") as f:
        return f.read()


SHIPPED_REGISTRY = repo_file("conf/registry.conf")
# the shipped config with its password files pointed at the target's secrets (and without the comment
# lines naming /run/..., which the target skips: it never lets the parsers open files under /run)
SHIPPED_CONFIG = b"".join(l for l in repo_file("conf/keygate.conf").splitlines(True) if b"/run" not in l).replace(b"../build/secrets/durable.pass", b"secrets/ok.pass") \
    .replace(b"../build/secrets/cache.pass", b"secrets/ok.pass")
SMALL_CONFIG = (b"listen 127.0.0.1:6400\nregistry registry.conf\n"
                b"instance durable 127.0.0.1:6401 plain\ninstance cache 127.0.0.1:6402 plain\n")
SMALL_REGISTRY = (b"namespace q: instance=durable ttl=none owner=queues\n"
                  b"namespace cache: instance=cache ttl=1h max-ttl=7d owner=cache purpose=\"a \\\"b\\\" c\"\n"
                  b"namespace cache:x instance=cache ttl=90s max-ttl=5m sliding owner=o\n"
                  b"channel push: instance=cache owner=n\n")
# more than 16 prefixes of one first byte: registry_lookup's binary-search path
MANY_A = b"".join(b"namespace a%d: instance=cache ttl=%ds owner=o\n" % (i, i + 1) for i in range(24)) + \
    b"namespace a instance=durable ttl=none owner=o\nnamespace a1:2: instance=cache ttl=1s owner=o\n" + \
    b"".join(b"channel a%d instance=cache owner=o\n" % i for i in range(20))
CONFIG = {
    "registry_shipped": b"\0" + SHIPPED_REGISTRY,
    "registry_small": b"\0" + SMALL_REGISTRY,
    "registry_many_one_byte": b"\0" + MANY_A,
    "registry_errors": b"\0" + b"namespace x: instance=nope ttl=1h owner=o\nnamespace y: ttl=0s owner=o\n"
                       b"bogus z:\nnamespace y: instance=cache ttl=1h max-ttl=1m owner=o\nchannel c: instance=cache ttl=1h owner=o\n"
                       b"namespace s: instance=cache ttl=none sliding owner=o\nnamespace u: instance=cache ttl=1h owner=o purpose=\"x\n"
                       b"namespace q: instance=cache instance=cache ttl=1h owner=o near-cache=5s color=red\nnamespace\n",
    "registry_near_cache": b"\0namespace kg: instance=durable ttl=none owner=keygate\n"
                           b"namespace u: instance=durable ttl=none near-cache=1m owner=api\n"
                           b"namespace v: instance=cache ttl=1h near-cache=5s owner=api\n"
                           b"namespace w: instance=durable ttl=1h sliding near-cache=5s owner=api\n",
    "registry_empty": b"\0# nothing\n\n",
    "registry_near_cache_ok": b"\0namespace kg: instance=durable ttl=none owner=keygate\n"
                              b"namespace kc: instance=cache ttl=none owner=keygate\n"
                              b"namespace u: instance=durable ttl=none near-cache=1m owner=api\n"
                              b"namespace v: instance=cache ttl=1h near-cache=5s owner=api\n",
    "registry_no_newline": b"\0namespace k: instance=durable ttl=7d owner=o",
    "config_shipped": b"\1" + SHIPPED_CONFIG + b"\1" + SHIPPED_REGISTRY,
    "config_small": b"\1" + SMALL_CONFIG + b"\1" + SMALL_REGISTRY,
    "config_full": b"\1" + SMALL_CONFIG.replace(b"plain\ninstance cache", b"plain password-file=secrets/ok.pass user=kg connections=4\ninstance cache") +
                   b"listen unix:kg.sock mode=0600\nlisten [::1]:6403 tls cert=c.crt key=c.key ca=ca.crt\nadmin-listen 127.0.0.1:9400\n"
                   b"user app password-file=secrets/ok.pass owners=queues,cache access=rw scripts=yes max-clients=50 rate=1000\n"
                   b"user ops sha256=" + b"ab" * 32 + b" owners=* access=ro\n"
                   b"threads 4\nmax-clients 100\nmax-pending 8\nmax-pinned 2\nmax-request-size 1mb\nclient-output-limit 1kb\n"
                   b"client-output-hard-limit 1m\nmax-memory 0\nconnect-timeout 500ms\nshutdown-timeout 1s\nlog-level warn\n"
                   b"\1" + SMALL_REGISTRY,
    "config_errors": b"\1" + b"listen 127.0.0.1\nlisten unix:\nlisten 1.2.3.4:0 tls\nlisten ::1:80\nregistry\nregistry a\nregistry b\n"
                     b"instance bad! 1:1 plain\ninstance d h:1\ninstance d h:2 tls\ninstance e h:1 plain ca=x connections=99\n"
                     b"instance f h:1 plain password-file=secrets/open.pass\ninstance g h:1 plain password-file=secrets/empty.pass\n"
                     b"instance h h:1 plain password-file=secrets/missing.pass user=u\nuser\nuser u sha256=zz owners=,a access=rx\n"
                     b"user u owners=*,a\nuser v sha256=" + b"ab" * 32 + b" owners=* access=ro max-clients=0 rate=-1 rate=x\nthreads 0\nmax-memory 1tb\nclient-output-limit 2gb\nconnect-timeout 2\nlog-level loud\nnope 1\n"
                     b"listen \"unterminated\n\1" + SMALL_REGISTRY,
    "config_timeouts": b"\1" + SMALL_CONFIG + b"client-timeout 0\nclient-header-timeout 10s\nbackend-timeout 500ms\n\1" +
                       SMALL_REGISTRY,
    "config_missing_all": b"\1# only a comment\n\1",
    "config_registry_elsewhere": b"\1" + SMALL_CONFIG.replace(b"registry registry.conf", b"registry secrets/ok.pass") + b"\1",
    "config_registry_folder": b"\1" + SMALL_CONFIG.replace(b"registry registry.conf", b"registry secrets") + b"\1",
    "config_registry_is_config": b"\1" + SMALL_CONFIG.replace(b"registry registry.conf", b"registry keygate.conf") + b"\1",
    "config_registry_unknown_instance": b"\1" + SMALL_CONFIG.replace(b"instance cache 127.0.0.1:6402 plain\n", b"") + b"\1" + SMALL_REGISTRY,
    "config_nine_instances": b"\1listen 127.0.0.1:1\nregistry registry.conf\n" +
                             b"".join(b"instance i%d h:%d plain\n" % (i, i + 1) for i in range(9)) + b"\1" + SMALL_REGISTRY,
}


def write_dir(name, cases):
    d = os.path.join(ROOT, name)
    os.makedirs(d, exist_ok=True)
    for old in os.listdir(d):
        if not old.startswith("crash_"):
            os.remove(os.path.join(d, old))
    for case, data in cases.items():
        with open(os.path.join(d, case), "wb") as f:
            f.write(data)


def main():
    policy = {}
    for name, case in POLICY.items():
        argv, opts = (case if isinstance(case, tuple) else (case, {}))
        policy[name] = policy_input(argv, **opts)
    write_dir("fuzz_policy", policy)
    resp = {}
    for name, stream in RESP.items():
        for split, limits in ((0, 0), (len(stream) // 2, 0), (3, 0x23)):
            resp["%s_%d_%d" % (name, split, limits)] = bytes([split & 0xFF, split >> 8, limits]) + stream
    write_dir("fuzz_resp", resp)
    reply = {}
    for name, stream in REPLY.items():
        for split, discard in ((0, 0), (len(stream) // 2, 1), (5, 0), (len(stream) - 1, 1)):
            split = max(split, 0)
            reply["%s_%d_%d" % (name, split, discard)] = bytes([discard, split & 0xFF, split >> 8]) + stream
    write_dir("fuzz_reply", reply)
    write_dir("fuzz_config", CONFIG)


if __name__ == "__main__":
    main()
