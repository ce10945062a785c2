// keygate with real RESP3 clients: node-redis v5 (npm redis@5, installed as `redis5`, with RESP: 3)
// and valkey-glide (npm @valkey/valkey-glide, RESP3, its own start-up commands), on node's test runner.
//
// tests/clients/run installs the pinned packages and runs this file next to test_node.mjs, with
// the same variables (KG_PORT: keygate, plain, no AUTH; KG_CACHE_PORT/KG_CACHE_PASS,
// KG_DURABLE_PORT/KG_DURABLE_PASS: the backends' plain ports). Each client runs the scenario
// of the RESP2 client tests: the TTL namespace (the registry's TTL lands on the backend), a
// pipeline across both instances in order, a transaction, pub/sub, a blocking pop, SCAN,
// errors. RESP3 is checked where the client shows it: maps as objects/records, doubles as
// numbers, nulls, pub/sub on the connection that also runs commands (node-redis), pushes.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';

import { createClient, ErrorReply } from 'redis5';
import { Batch, GlideClient, GlideClientConfiguration, ProtocolVersion } from '@valkey/valkey-glide';

const env = (name) => {
    const v = process.env[name];
    if (!v) throw new Error(`${name} is not set; run tests/clients/run`);
    return v;
};
const PORT = Number(env('KG_PORT'));
const BACKENDS = {
    cache: { port: Number(env('KG_CACHE_PORT')), password: env('KG_CACHE_PASS') },
    durable: { port: Number(env('KG_DURABLE_PORT')), password: env('KG_DURABLE_PASS') },
};
const RUN = randomUUID().slice(0, 8);
const NONAMESPACE = (key) => `NONAMESPACE key '${key}' matches no namespace in the registry`;

// The backends, directly (node-redis v5 in RESP2: only to check what landed there).
async function direct(name) {
    const { port, password } = BACKENDS[name];
    const c = createClient({ socket: { host: '127.0.0.1', port, reconnectStrategy: false }, password });
    c.on('error', () => {});
    await c.connect();
    return c;
}

// Wait until cond() holds (messages arrive asynchronously), at most ms.
async function until(cond, ms, what) {
    const end = Date.now() + ms;
    while (!cond()) {
        if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 10));
    }
}

// ---- node-redis v5, RESP: 3 ----------------------------------------------------------------

async function nr3(opts = {}) {
    const c = createClient({ RESP: 3, socket: { host: '127.0.0.1', port: PORT, reconnectStrategy: false }, ...opts });
    c.on('error', () => {});
    await c.connect();
    return c;
}

describe('node-redis v5 (RESP3)', () => {
    let r, cache, durable;
    const key = (ns, name) => `${ns}nr5:${RUN}:${name}`;

    before(async () => {
        // connect() sends HELLO 3 and CLIENT SETINFO (errors ignored) and waits for them
        [r, cache, durable] = await Promise.all([nr3(), direct('cache'), direct('durable')]);
    });

    after(async () => {
        await Promise.allSettled([r, cache, durable].map((c) => c.quit()));
    });

    it('HELLO 3 on connect, then PING; CLIENT INFO says resp=3', async () => {
        assert.equal(r.isReady, true);
        assert.equal(await r.ping(), 'PONG');
        assert.match(await r.clientInfo().then((i) => `resp=${i.resp}`), /resp=3/);
    });

    it('SET/GET in a TTL namespace: the registry TTL lands on the cache backend', async () => {
        const k = key('cache:', 'x');
        assert.equal(await r.set(k, '1'), 'OK');
        assert.equal(await r.get(k), '1');
        const ttl = await cache.ttl(k);
        assert.ok(ttl > 0 && ttl <= 3600, `TTL on cache is ${ttl}, want (0, 3600]`);
        assert.equal(await durable.exists(k), 0);
        assert.equal(await r.get(key('cache:', 'missing')), null);
    });

    it('RESP3 shapes: a map (HGETALL), a double (ZSCORE, ZINCRBY in a TTL namespace), a set, nulls', async () => {
        const h = key('q:', 'h'), z = key('cache:', 'z'), s = key('q:', 's');
        assert.equal(await r.hSet(h, { a: '1', b: '2' }), 2);
        assert.deepEqual({ ...await r.hGetAll(h) }, { a: '1', b: '2' });
        assert.equal(await r.zAdd(z, { score: 1.5, value: 'm' }), 1);
        assert.equal(await r.zScore(z, 'm'), 1.5);
        assert.equal(await r.zIncrBy(z, 1, 'm'), 2.5);
        assert.equal(await r.sAdd(s, ['a', 'b']), 2);
        const members = await r.sMembers(s);
        assert.deepEqual([...members].sort(), ['a', 'b']);
        assert.deepEqual(await r.mGet([key('q:', 'none'), key('cache:', 'x'), key('cache:', 'none')]), [null, '1', null]);
    });

    it('errors: NONAMESPACE is an ErrorReply, the connection goes on', async () => {
        await assert.rejects(r.set('nope:nr5', '1'), (err) => {
            assert.ok(err instanceof ErrorReply, `${err.constructor.name} is not an ErrorReply`); // v5: SimpleError
            assert.equal(err.message, NONAMESPACE('nope:nr5'));
            return true;
        });
        assert.equal(await r.ping(), 'PONG');
    });

    it('Promise.all of 1000 mixed commands (auto-pipelined) across both instances, in order', async () => {
        const cmds = [], want = [];
        for (let i = 0; i < 1000; i++) {
            switch (i % 4) {
            case 0: cmds.push(r.set(key('cache:', `p${i}`), `c${i}`)); want.push('OK'); break;
            case 1: cmds.push(r.set(key('q:', `p${i}`), `q${i}`)); want.push('OK'); break;
            case 2: cmds.push(r.get(key('cache:', `p${i - 2}`))); want.push(`c${i - 2}`); break;
            default: cmds.push(r.get(key('q:', `p${i - 2}`))); want.push(`q${i - 2}`);
            }
        }
        assert.deepEqual(await Promise.all(cmds), want);
    });

    it('multi().exec() in a TTL namespace', async () => {
        const k = key('cache:', 'tx');
        await r.hSet(key('cache:', 'txh'), { a: '1', b: '2' });
        const got = await r.multi().set(k, '1').incr(k).get(k).hGetAll(key('cache:', 'txh')).exec();
        assert.deepEqual([...got.slice(0, 3), { ...got[3] }], ['OK', 2, '2', { a: '1', b: '2' }]);
        const ttl = await cache.ttl(k);
        assert.ok(ttl > 0 && ttl <= 3600, `TTL on cache is ${ttl}`);
    });

    it('pub/sub on the same connection that runs commands (RESP3 pushes)', async () => {
        const ch = `push:nr5:${RUN}`;
        const got = [];
        await r.subscribe(ch, (m) => got.push(m));
        // still a normal connection: commands go on while subscribed
        assert.equal(await r.set(key('q:', 'sub'), 'v'), 'OK');
        const pub = await nr3();
        try {
            for (let i = 0; i < 20; i++) assert.equal(await pub.publish(ch, `m${i}`), 1);
            assert.equal(await r.get(key('q:', 'sub')), 'v');
            await until(() => got.length === 20, 5000, '20 messages');
            assert.deepEqual(got, Array.from({ length: 20 }, (_, i) => `m${i}`));
            await r.unsubscribe(ch);
            assert.equal(await pub.publish(ch, 'late'), 0);
        } finally {
            await pub.quit();
        }
        assert.equal(await r.ping(), 'PONG');
    });

    it('blocking pop: a timeout is null, a push is served', async () => {
        const b = await nr3();
        try {
            const k = key('q:', 'bl');
            assert.equal(await b.blPop(k, 0.1), null);
            const waiting = b.blPop(k, 5);
            await new Promise((ok) => setTimeout(ok, 100));
            assert.equal(await r.rPush(k, 'x'), 1);
            assert.deepEqual({ ...await waiting }, { key: k, element: 'x' });
        } finally {
            await b.quit();
        }
    });

    it('scanIterator finds the keys (MATCH inside one namespace)', async () => {
        const base = `cache:scan5:${RUN}`;
        await Promise.all(Array.from({ length: 50 }, (_, i) => r.set(`${base}:${i}`, `${i}`)));
        const found = new Set();
        for await (const batch of r.scanIterator({ MATCH: `${base}:*`, COUNT: 10 })) {
            for (const k of [].concat(batch)) found.add(k);
        }
        assert.deepEqual([...found].sort(), Array.from({ length: 50 }, (_, i) => `${base}:${i}`).sort());
    });
});

// ---- valkey-glide (RESP3) ------------------------------------------------------------------

async function glide(extra = {}) {
    return GlideClient.createClient({
        addresses: [{ host: '127.0.0.1', port: PORT }],
        protocol: ProtocolVersion.RESP3,
        requestTimeout: 5000,
        ...extra,
    });
}

describe('valkey-glide (RESP3)', () => {
    let g, cache, durable;
    const key = (ns, name) => `${ns}gl:${RUN}:${name}`;

    before(async () => {
        // createClient sends HELLO 3, CLIENT SETINFO ... and its other start-up commands
        [g, cache, durable] = await Promise.all([glide(), direct('cache'), direct('durable')]);
    });

    after(async () => {
        g?.close();
        await Promise.allSettled([cache, durable].map((c) => c.quit()));
    });

    it('connects and PINGs', async () => {
        assert.equal(await g.ping(), 'PONG');
        assert.match(String(await g.customCommand(['CLIENT', 'INFO'])), /resp=3/);
    });

    it('SET/GET in a TTL namespace: the registry TTL lands on the cache backend', async () => {
        const k = key('cache:', 'x');
        assert.equal(await g.set(k, '1'), 'OK');
        assert.equal(await g.get(k), '1');
        const ttl = await cache.ttl(k);
        assert.ok(ttl > 0 && ttl <= 3600, `TTL on cache is ${ttl}, want (0, 3600]`);
        assert.equal(await durable.exists(k), 0);
        assert.equal(await g.get(key('cache:', 'missing')), null);
    });

    it('RESP3 shapes: a map, doubles, a set, nulls', async () => {
        const h = key('q:', 'h'), z = key('cache:', 'z'), s = key('q:', 's');
        assert.equal(await g.hset(h, { a: '1', b: '2' }), 2);
        const fields = Object.fromEntries((await g.hgetall(h)).map(({ field, value }) => [field, value]));
        assert.deepEqual(fields, { a: '1', b: '2' });
        assert.equal(await g.zadd(z, [{ element: 'm', score: 1.5 }]), 1);
        assert.equal(await g.zscore(z, 'm'), 1.5);
        assert.equal(await g.zincrby(z, 1, 'm'), 2.5);
        assert.equal(await g.sadd(s, ['a', 'b']), 2);
        assert.deepEqual([...await g.smembers(s)].sort(), ['a', 'b']);
        assert.deepEqual(await g.mget([key('q:', 'none'), key('cache:', 'x'), key('cache:', 'none')]), [null, '1', null]);
        // a raw map through customCommand: a RESP3 map, not a flat array
        const raw = await g.customCommand(['HGETALL', h]);
        assert.ok(!Array.isArray(raw) || raw.every((e) => typeof e === 'object'), `HGETALL raw: ${JSON.stringify(raw)}`);
    });

    it('errors: NONAMESPACE rejects with the message, the client goes on', async () => {
        await assert.rejects(g.set('nope:gl', '1'), (err) => {
            // glide prints a server error as "CODE: message"
            assert.equal(err.message.replace(/^NONAMESPACE: /, 'NONAMESPACE '), NONAMESPACE('nope:gl'));
            return true;
        });
        assert.equal(await g.ping(), 'PONG');
    });

    it('a pipeline (Batch, not atomic) of 1000 mixed commands across both instances, in order', async () => {
        const b = new Batch(false), want = [];
        for (let i = 0; i < 1000; i++) {
            switch (i % 4) {
            case 0: b.set(key('cache:', `p${i}`), `c${i}`); want.push('OK'); break;
            case 1: b.set(key('q:', `p${i}`), `q${i}`); want.push('OK'); break;
            case 2: b.get(key('cache:', `p${i - 2}`)); want.push(`c${i - 2}`); break;
            default: b.get(key('q:', `p${i - 2}`)); want.push(`q${i - 2}`);
            }
        }
        assert.deepEqual(await g.exec(b, true), want);
        // concurrent calls: glide's core sends them in no fixed order (against Redis directly too),
        // so each key's INCRs must count 1..250 once each, in some order
        const concurrent = await Promise.all(Array.from({ length: 500 }, (_, i) => g.incr(key(i % 2 ? 'q:' : 'cache:', 'n'))));
        for (const parity of [0, 1]) {
            const vals = concurrent.filter((_, i) => i % 2 === parity).sort((a, b) => a - b);
            assert.deepEqual(vals, Array.from({ length: 250 }, (_, i) => i + 1), `INCRs of key ${parity}`);
        }
    });

    it('a transaction (Batch, atomic) in a TTL namespace', async () => {
        const k = key('cache:', 'tx');
        const tx = new Batch(true).set(k, '1').incr(k).get(k).zscore(key('cache:', 'z'), 'm');
        assert.deepEqual(await g.exec(tx, true), ['OK', 2, '2', 2.5]);
        const ttl = await cache.ttl(k);
        assert.ok(ttl > 0 && ttl <= 3600, `TTL on cache is ${ttl}`);
    });

    it('pub/sub: a subscriber client gets every message as a push', async () => {
        const ch = `push:gl:${RUN}`;
        const got = [];
        const sub = await glide({
            pubsubSubscriptions: {
                channelsAndPatterns: { [GlideClientConfiguration.PubSubChannelModes.Exact]: new Set([ch]) },
                callback: (msg) => got.push(String(msg.message)),
            },
        });
        try {
            // the subscription is made at connect: wait until a PUBLISH reaches it
            let n = 0;
            for (let i = 0; i < 50 && n === 0; i++) {
                n = await g.publish('probe', ch);
                if (n === 0) await new Promise((ok) => setTimeout(ok, 50));
            }
            assert.equal(n, 1, 'the glide subscriber is subscribed through keygate');
            for (let i = 0; i < 20; i++) assert.equal(await g.publish(`m${i}`, ch), 1);
            await until(() => got.length === 21, 5000, '21 messages');
            assert.deepEqual(got, ['probe', ...Array.from({ length: 20 }, (_, i) => `m${i}`)]);
            // the subscribed client still runs commands (RESP3)
            assert.equal(await sub.set(key('q:', 'sub'), 'v'), 'OK');
            assert.equal(await sub.get(key('q:', 'sub')), 'v');
        } finally {
            sub.close();
        }
    });

    it('blocking pop: a timeout is null, a push is served', async () => {
        const b = await glide();
        try {
            const k = key('q:', 'bl');
            assert.equal(await b.blpop([k], 0.1), null);
            const waiting = b.blpop([k], 5);
            await new Promise((ok) => setTimeout(ok, 100));
            assert.equal(await g.rpush(k, ['x']), 1);
            assert.deepEqual(await waiting, [k, 'x']);
        } finally {
            b.close();
        }
    });

    it('SCAN with MATCH inside one namespace finds the keys', async () => {
        const base = `cache:scangl:${RUN}`;
        await Promise.all(Array.from({ length: 50 }, (_, i) => g.set(`${base}:${i}`, `${i}`)));
        const found = new Set();
        let cursor = '0';
        do {
            const [next, keys] = await g.scan(cursor, { match: `${base}:*`, count: 10 });
            keys.forEach((k) => found.add(String(k)));
            cursor = String(next);
        } while (cursor !== '0');
        assert.deepEqual([...found].sort(), Array.from({ length: 50 }, (_, i) => `${base}:${i}`).sort());
    });
});
