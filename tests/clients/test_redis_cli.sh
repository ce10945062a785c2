#!/usr/bin/env bash
# test_redis_cli.sh: keygate with redis-cli and redis-benchmark (Debian's redis-tools).
#
# tests/clients/run starts two TLS redis-servers and keygate and runs this with:
#   KG_PORT                          keygate on 127.0.0.1 (plain RESP2, no AUTH)
#   KG_CACHE_PORT   KG_CACHE_PASS    the cache backend's plain port and password
#   KG_DURABLE_PORT KG_DURABLE_PASS  the durable backend's plain port and password
# A check that fails because keygate mishandles what redis-cli sends says
# "KEYGATE BUG:" in its failure text. The last line is `redis-cli: N passed, M failed`.
set -uo pipefail

: "${KG_PORT:?run tests/clients/run}" "${KG_CACHE_PORT:?}" "${KG_CACHE_PASS:?}" "${KG_DURABLE_PORT:?}" "${KG_DURABLE_PASS:?}"

passed=0
failed=0
run_id=$$-$RANDOM
tmp=$(mktemp -d "${TMPDIR:-/tmp}/keygate-cli-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

kg() { timeout 30 redis-cli -h 127.0.0.1 -p "$KG_PORT" "$@"; }
cache() { REDISCLI_AUTH=$KG_CACHE_PASS timeout 30 redis-cli -h 127.0.0.1 -p "$KG_CACHE_PORT" "$@"; }
durable() { REDISCLI_AUTH=$KG_DURABLE_PASS timeout 30 redis-cli -h 127.0.0.1 -p "$KG_DURABLE_PORT" "$@"; }

ok() {
    passed=$((passed + 1))
    echo "ok   - $1"
}
not_ok() {
    failed=$((failed + 1))
    echo "FAIL - $1"
    shift
    local line
    for line in "$@"; do echo "       $line"; done
}
# expect NAME WANT GOT: exact match of the output (trailing blank lines stripped).
expect() {
    if [ "$3" = "$2" ]; then ok "$1"; else not_ok "$1" "want: $(printf '%q' "$2")" "got:  $(printf '%q' "$3")"; fi
}
# in_range NAME LO HI GOT: LO < GOT <= HI, GOT an integer.
in_range() {
    if [[ $4 =~ ^-?[0-9]+$ ]] && [ "$4" -gt "$2" ] && [ "$4" -le "$3" ]; then
        ok "$1 ($4)"
    else
        not_ok "$1" "want an integer in ($2, $3]" "got:  $(printf '%q' "$4")"
    fi
}
# first_line TEXT: the first line (redis-cli prints an empty line after an error).
first_line() { printf '%s\n' "$1" | head -n 1; }

# indent TEXT: show a tool's output under the check it belongs to.
indent() { printf '%s\n' "$1" | sed 's/^/       | /'; }

# resp ARGS...: one command in RESP (mass-insertion format).
resp() {
    printf '*%d\r\n' $#
    local a
    for a in "$@"; do printf '$%d\r\n%s\r\n' "${#a}" "$a"; done
}

echo "== redis-cli $(redis-cli --version | awk '{print $2}') against keygate on 127.0.0.1:$KG_PORT"

# ---- one-shot commands -------------------------------------------------------------------

expect "PING" "PONG" "$(kg PING 2>&1)"
expect "SET cache:x 1 -> OK" "OK" "$(kg SET "cache:cli:$run_id:x" 1 2>&1)"
expect "GET cache:x -> 1" "1" "$(kg GET "cache:cli:$run_id:x" 2>&1)"
in_range "TTL cache:x through keygate in (0, 3600]" 0 3600 "$(kg TTL "cache:cli:$run_id:x" 2>&1)"
in_range "TTL cache:x on the cache backend in (0, 3600]" 0 3600 "$(cache TTL "cache:cli:$run_id:x" 2>&1)"
expect "cache:x is not on durable" "0" "$(durable EXISTS "cache:cli:$run_id:x" 2>&1)"
expect "SET q:run:1 payload -> OK" "OK" "$(kg SET "q:cli:$run_id:run:1" payload 2>&1)"
expect "q: key on durable with no TTL" "-1" "$(durable TTL "q:cli:$run_id:run:1" 2>&1)"
expect "SET nope 1 -> NONAMESPACE text" "NONAMESPACE key 'nope' matches no namespace in the registry" \
    "$(first_line "$(kg SET nope 1 2>&1)")"
expect "SET with a space in the key -> NONAMESPACE text quotes it" \
    "NONAMESPACE key 'no pe' matches no namespace in the registry" "$(first_line "$(kg SET 'no pe' 1 2>&1)")"
expect "ECHO" "hello keygate" "$(kg ECHO 'hello keygate' 2>&1)"
expect "-n 0 (SELECT 0 first) then SET" "OK" "$(kg -n 0 SET "cache:cli:$run_id:n0" 1 2>&1)"
expect "SELECT 1 refused" "DENIED" "$(first_line "$(kg SELECT 1 2>&1)" | awk '{print $1}')"
expect "HSET/HGETALL" $'2\na\n1\nb\n2' "$(kg HSET "cache:cli:$run_id:h" a 1 b 2 2>&1; kg HGETALL "cache:cli:$run_id:h" 2>&1)"
info=$(kg INFO 2>&1)
if grep -q '^keygate_version:' <<<"$info" && grep -q '^redis_version:' <<<"$info"; then
    ok "INFO answered by keygate"
else
    not_ok "INFO answered by keygate" "got: $(head -c 300 <<<"$info")"
fi
count=$(kg COMMAND COUNT 2>&1)
in_range "COMMAND COUNT (redis-cli hints)" 100 1000 "$count"
# Commands read from stdin (non-interactive): one connection, replies in order.
expect "commands on stdin" $'OK\nOK\nv1\nv2' "$(printf 'SET cache:cli:%s:s1 v1\nSET q:cli:%s:s2 v2\nGET cache:cli:%s:s1\nGET q:cli:%s:s2\n' \
    "$run_id" "$run_id" "$run_id" "$run_id" | kg 2>&1)"
# Binary-safe values through -x (the value is stdin).
head -c 4096 /dev/urandom >"$tmp/blob"
kg -x SET "cache:cli:$run_id:blob" <"$tmp/blob" >/dev/null 2>&1
cache --raw GET "cache:cli:$run_id:blob" | head -c 4096 >"$tmp/blob.back"
if cmp -s "$tmp/blob" "$tmp/blob.back"; then ok "-x SET of 4 KiB of random bytes lands unchanged"; else not_ok "-x SET of 4 KiB of random bytes lands unchanged"; fi

# ---- --pipe mass insertion -----------------------------------------------------------------

n=10000
for ((i = 0; i < n; i++)); do resp SET "cache:cli:$run_id:pipe:$i" "value-$i"; done >"$tmp/mass.resp"
out=$(timeout 120 redis-cli -h 127.0.0.1 -p "$KG_PORT" --pipe <"$tmp/mass.resp" 2>&1)
rc=$?
indent "$out"
if [ $rc -eq 0 ] && grep -q "errors: 0, replies: $n" <<<"$out"; then
    ok "--pipe mass insertion of $n SETs: errors: 0, replies: $n"
else
    not_ok "--pipe mass insertion of $n SETs: errors: 0, replies: $n" "exit status $rc"
fi
expect "--pipe: first key" "value-0" "$(cache GET "cache:cli:$run_id:pipe:0" 2>&1)"
expect "--pipe: last key" "value-$((n - 1))" "$(cache GET "cache:cli:$run_id:pipe:$((n - 1))" 2>&1)"
landed=$(cache --scan --pattern "cache:cli:$run_id:pipe:*" 2>/dev/null | wc -l)
expect "--pipe: $n keys on the cache backend" "$n" "$landed"
in_range "--pipe: a mass-inserted key got the namespace TTL" 0 3600 "$(cache TTL "cache:cli:$run_id:pipe:4242" 2>&1)"

# --pipe across both instances with errors in between: every command answered, errors counted.
{
    for ((i = 0; i < 1000; i++)); do
        resp SET "cache:cli:$run_id:mix:$i" "$i"
        resp INCR "q:cli:$run_id:mix"
        if ((i % 100 == 0)); then resp GET "nope:$i"; fi
    done
} >"$tmp/mixed.resp"
out=$(timeout 60 redis-cli -h 127.0.0.1 -p "$KG_PORT" --pipe <"$tmp/mixed.resp" 2>&1)
if grep -q "errors: 10, replies: 2010" <<<"$out"; then
    ok "--pipe across both instances with 10 NONAMESPACE: errors: 10, replies: 2010"
else
    not_ok "--pipe across both instances with 10 NONAMESPACE: errors: 10, replies: 2010" "got: $(tail -n 2 <<<"$out" | tr '\n' ' ')"
fi
expect "--pipe mixed: INCR count on durable" "1000" "$(durable GET "q:cli:$run_id:mix" 2>&1)"

# ---- SCAN with a MATCH inside one namespace --------------------------------------------------
# DESIGN.md section 3 denies "KEYS / SCAN without a MATCH inside one allowed namespace", so a
# SCAN whose MATCH lies inside one namespace is forwarded to that namespace's instance.
scan_out=$(kg --scan --pattern "cache:cli:$run_id:pipe:1*" 2>&1)
scan_rc=$?
scan_n=$(grep -c "^cache:cli:$run_id:pipe:1" <<<"$scan_out")
if [ $scan_rc -eq 0 ] && [ "$scan_n" -eq 1111 ]; then
    ok "redis-cli --scan --pattern 'cache:...:pipe:1*' finds 1111 keys"
else
    not_ok "redis-cli --scan --pattern 'cache:...:pipe:1*' finds 1111 keys" \
        "KEYGATE BUG: SCAN 0 MATCH cache:cli:...:pipe:1* (MATCH inside the cache: namespace) should be" \
        "forwarded to cache (DESIGN.md section 3 denies only SCAN without such a MATCH);" \
        "got exit $scan_rc, $scan_n keys: $(head -n 1 <<<"$scan_out")"
fi

# ---- redis-benchmark ---------------------------------------------------------------------------

bench() {
    local name=$1 out rc
    shift
    out=$(timeout 120 redis-benchmark -h 127.0.0.1 -p "$KG_PORT" "$@" 2>&1)
    rc=$?
    # -q prints progress with \r; keep the final figures.
    out=$(tr '\r' '\n' <<<"$out" | grep -v 'rps=' | sed '/^[[:space:]]*$/d')
    indent "$out"
    if [ $rc -eq 0 ] && grep -q 'requests per second' <<<"$out" && ! grep -qi 'error' <<<"$(grep -v 'Could not fetch server CONFIG' <<<"$out")"; then
        ok "$name"
    else
        not_ok "$name" "exit status $rc"
    fi
}
bench "redis-benchmark -n 10000 -q SET cache:__rand_int__ x" -n 10000 -q SET 'cache:__rand_int__' x
bench "redis-benchmark -n 10000 -c 20 -P 16 -r 1000 -q SET cache:__rand_int__ x" -n 10000 -c 20 -P 16 -r 1000 -q SET 'cache:__rand_int__' x
in_range "redis-benchmark keys got the namespace TTL" 0 3600 "$(cache TTL "cache:__rand_int__" 2>&1)"

echo "redis-cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
