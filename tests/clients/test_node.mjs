// keygate with real clients: ioredis and node-redis v4 (npm) through keygate, on node's test runner.
//
// tests/clients/run installs the pinned packages (package.json / package-lock.json) into
// tests/clients/node_modules, starts two TLS redis-servers and keygate, and runs
// `node --test tests/clients/test_node.mjs` with these variables set:
//
//   KG_PORT                          keygate on 127.0.0.1 (plain RESP2, no AUTH)
//   KG_CACHE_PORT   KG_CACHE_PASS    the cache backend's plain port and password
//   KG_DURABLE_PORT KG_DURABLE_PASS  the durable backend's plain port and password
//
// The direct connections use the same client library on the backend's plain port with
// its password, to check what really landed there (injected TTL, which instance).
// A test that fails because keygate mishandles what a client sends says so in its
// message, starting with "KEYGATE BUG:".
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';

import Redis from 'ioredis';
import { createClient, commandOptions } from 'redis';

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

// ---- ioredis ---------------------------------------------------------------------------

function ioredisClient(opts = {}) {
    const r = new Redis({ host: '127.0.0.1', port: PORT, maxRetriesPerRequest: 1, ...opts });
    r.on('error', () => {}); // surfaced through the rejected commands instead
    return r;
}

function ioredisDirect(name) {
    const r = new Redis({ host: '127.0.0.1', ...BACKENDS[name], maxRetriesPerRequest: 1 });
    r.on('error', () => {});
    return r;
}

describe('ioredis', () => {
    let r, cache, durable;
    const key = (ns, name) => `${ns}io:${RUN}:${name}`;

    before(async () => {
        r = ioredisClient();
        cache = ioredisDirect('cache');
        durable = ioredisDirect('durable');
        // ioredis's ready check sends INFO and waits for it; CLIENT SETINFO goes first.
        await Promise.all([r, cache, durable].map((c) => new Promise((ok, fail) => {
            if (c.status === 'ready') return ok();
            c.once('ready', ok);
            c.once('end', () => fail(new Error('connection ended before ready')));
        })));
    });

    after(async () => {
        await Promise.allSettled([r, cache, durable].map((c) => c.quit()));
    });

    it('connects with the ready check (INFO) and CLIENT SETINFO, then PING', async () => {
        assert.equal(r.status, 'ready');
        assert.equal(await r.ping(), 'PONG');
    });

    it('connectionName sends CLIENT SETNAME on connect', async () => {
        const c = ioredisClient({ connectionName: 'io-on-connect' });
        try {
            assert.equal(await c.client('GETNAME'), 'io-on-connect');
        } finally {
            await c.quit();
        }
    });

    it('echo, client setname/getname, select 0', async () => {
        assert.equal(await r.echo('hello keygate'), 'hello keygate');
        assert.equal(await r.client('SETNAME', 'io-worker'), 'OK');
        assert.equal(await r.client('GETNAME'), 'io-worker');
        assert.equal(await r.select(0), 'OK');
    });

    it('info answered by keygate', async () => {
        const info = await r.info();
        assert.match(info, /^redis_version:7\./m);
        assert.match(info, /^keygate_version:/m);
    });

    it('SET/GET cache: gets the registry TTL on the cache backend', async () => {
        const k = key('cache:', 'x');
        assert.equal(await r.set(k, '1'), 'OK');
        assert.equal(await r.get(k), '1');
        const ttl = await cache.ttl(k);
        assert.ok(ttl > 0 && ttl <= 3600, `TTL on cache is ${ttl}, want (0, 3600]`);
        assert.equal(await durable.exists(k), 0);
    });

    it('SET/GET q: lands on durable with no TTL', async () => {
        const k = key('q:', 'run');
        assert.equal(await r.set(k, 'payload'), 'OK');
        assert.equal(await r.get(k), 'payload');
        assert.equal(await durable.get(k), 'payload');
        assert.equal(await durable.ttl(k), -1);
        assert.equal(await cache.exists(k), 0);
    });

    it('NONAMESPACE is a rejected command with the message', async () => {
        await assert.rejects(r.set('nope:io', '1'), (err) => {
            assert.equal(err.name, 'ReplyError');
            assert.equal(err.message, NONAMESPACE('nope:io'));
            return true;
        });
        assert.equal(await r.ping(), 'PONG');
    });

    it('HSET/HGETALL', async () => {
        const k = key('cache:', 'h');
        assert.equal(await r.hset(k, { a: '1', b: '2' }), 2);
        assert.deepEqual(await r.hgetall(k), { a: '1', b: '2' });
    });

    it('binary values round-trip (getBuffer)', async () => {
        const values = [Buffer.from(Array.from({ length: 256 }, (_, i) => i)), Buffer.from('\r\n*1\r\n'), randomBytes(1 << 20)];
        for (const [i, v] of values.entries()) {
            const k = key('cache:', `bin${i}`);
            assert.equal(await r.set(k, v), 'OK');
            assert.ok((await r.getBuffer(k)).equals(v), `value ${i} changed`);
            assert.ok((await cache.getBuffer(k)).equals(v));
        }
    });

    it('.pipeline() of 1000 mixed commands across both instances, replies in order', async () => {
        const p = r.pipeline();
        const want = [];
        for (let i = 0; i < 1000; i++) {
            switch (i % 4) {
            case 0: p.set(key('cache:', `p${i}`), `c${i}`); want.push('OK'); break;
            case 1: p.set(key('q:', `p${i}`), `q${i}`); want.push('OK'); break;
            case 2: p.get(key('cache:', `p${i - 2}`)); want.push(`c${i - 2}`); break;
            default: p.get(key('q:', `p${i - 2}`)); want.push(`q${i - 2}`);
            }
        }
        const got = await p.exec();
        assert.equal(got.length, 1000);
        got.forEach(([err, v], i) => {
            assert.equal(err, null, `reply ${i}: ${err}`);
            assert.equal(v, want[i], `reply ${i} out of order`);
        });
    });

    it('.pipeline() keeps an error in its slot', async () => {
        const k = key('cache:', 'e');
        const got = await r.pipeline().set(k, '1').get('nope:iopipe').get(k).exec();
        assert.deepEqual(got[0], [null, 'OK']);
        assert.equal(got[1][0]?.message, NONAMESPACE('nope:iopipe'));
        assert.deepEqual(got[2], [null, '1']);
    });

    it('enableAutoPipelining with 2000 concurrent INCRs on both instances', async () => {
        const c = ioredisClient({ enableAutoPipelining: true });
        try {
            const kc = key('cache:', 'auto'), kq = key('q:', 'auto');
            const got = await Promise.all(Array.from({ length: 2000 }, (_, i) => c.incr(i % 2 ? kq : kc)));
            got.forEach((v, i) => assert.equal(v, Math.floor(i / 2) + 1, `reply ${i}`));
            assert.equal(await cache.get(kc), '1000');
            assert.equal(await durable.get(kq), '1000');
        } finally {
            await c.quit();
        }
    });
});

// ---- node-redis v4 -------------------------------------------------------------------

async function nodeRedisClient(opts = {}) {
    const c = createClient({ socket: { host: '127.0.0.1', port: PORT, reconnectStrategy: false }, ...opts });
    c.on('error', () => {});
    await c.connect();
    return c;
}

async function nodeRedisDirect(name) {
    const { port, password } = BACKENDS[name];
    const c = createClient({ socket: { host: '127.0.0.1', port, reconnectStrategy: false }, password });
    c.on('error', () => {});
    await c.connect();
    return c;
}

describe('node-redis v4', () => {
    let r, cache, durable;
    const key = (ns, name) => `${ns}nr:${RUN}:${name}`;

    before(async () => {
        // connect() sends CLIENT SETINFO LIB-VER/LIB-NAME (errors ignored) and waits for them.
        [r, cache, durable] = await Promise.all([nodeRedisClient(), nodeRedisDirect('cache'), nodeRedisDirect('durable')]);
    });

    after(async () => {
        await Promise.allSettled([r, cache, durable].map((c) => c.quit()));
    });

    it('connects (CLIENT SETINFO on connect) and PINGs', async () => {
        assert.equal(r.isReady, true);
        assert.equal(await r.ping(), 'PONG');
    });

    it('name option sends CLIENT SETNAME on connect', async () => {
        const c = await nodeRedisClient({ name: 'nr-on-connect' });
        try {
            assert.equal(await c.clientGetName(), 'nr-on-connect');
        } finally {
            await c.quit();
        }
    });

    it('echo, client setname/getname, client id, info', async () => {
        assert.equal(await r.echo('hello keygate'), 'hello keygate');
        assert.equal(await r.clientSetName('nr-worker'), 'OK');
        assert.equal(await r.clientGetName(), 'nr-worker');
        assert.equal(typeof await r.clientId(), 'number');
        assert.match(await r.info(), /^keygate_version:/m);
    });

    it('SET/GET cache: gets the registry TTL on the cache backend', async () => {
        const k = key('cache:', 'x');
        assert.equal(await r.set(k, '1'), 'OK');
        assert.equal(await r.get(k), '1');
        const ttl = await cache.ttl(k);
        assert.ok(ttl > 0 && ttl <= 3600, `TTL on cache is ${ttl}, want (0, 3600]`);
        assert.equal(await durable.exists(k), 0);
    });

    it('SET/GET q: lands on durable with no TTL', async () => {
        const k = key('q:', 'run');
        assert.equal(await r.set(k, 'payload'), 'OK');
        assert.equal(await durable.get(k), 'payload');
        assert.equal(await durable.ttl(k), -1);
        assert.equal(await cache.exists(k), 0);
    });

    it('NONAMESPACE is an ErrorReply with the message', async () => {
        await assert.rejects(r.set('nope:nr', '1'), (err) => {
            assert.equal(err.constructor.name, 'ErrorReply');
            assert.equal(err.message, NONAMESPACE('nope:nr'));
            return true;
        });
        assert.equal(await r.ping(), 'PONG');
    });

    it('HSET/HGETALL', async () => {
        const k = key('cache:', 'h');
        assert.equal(await r.hSet(k, { a: '1', b: '2' }), 2);
        assert.deepEqual({ ...await r.hGetAll(k) }, { a: '1', b: '2' });
    });

    it('binary values round-trip (returnBuffers)', async () => {
        const values = [Buffer.from(Array.from({ length: 256 }, (_, i) => i)), randomBytes(1 << 20)];
        for (const [i, v] of values.entries()) {
            const k = key('cache:', `bin${i}`);
            assert.equal(await r.set(k, v), 'OK');
            assert.ok((await r.get(commandOptions({ returnBuffers: true }), k)).equals(v), `value ${i} changed`);
        }
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
        const got = await Promise.all(cmds);
        assert.deepEqual(got, want);
    });

    it('Promise.all of 2000 INCRs on both instances counts in order', async () => {
        const kc = key('cache:', 'n'), kq = key('q:', 'n');
        const got = await Promise.all(Array.from({ length: 2000 }, (_, i) => r.incr(i % 2 ? kq : kc)));
        got.forEach((v, i) => assert.equal(v, Math.floor(i / 2) + 1, `reply ${i}`));
    });

    it('multi().execAsPipeline() (no MULTI sent) keeps order', async () => {
        const k = key('cache:', 'eap');
        const got = await r.multi().set(k, 'v').get(k).set(key('q:', 'eap'), 'w').get(key('q:', 'eap')).execAsPipeline();
        assert.deepEqual(got, ['OK', 'v', 'OK', 'w']);
    });

    it('an error in a Promise.all pipeline stays in its slot', async () => {
        const k = key('cache:', 'e');
        const got = await Promise.allSettled([r.set(k, '1'), r.get('nope:nrpipe'), r.get(k)]);
        assert.equal(got[0].value, 'OK');
        assert.equal(got[1].status, 'rejected');
        assert.equal(got[1].reason.message, NONAMESPACE('nope:nrpipe'));
        assert.equal(got[2].value, '1');
    });

    it('isolated pool (executeIsolated) works through keygate', async () => {
        const k = key('cache:', 'iso');
        const got = await r.executeIsolated(async (c) => {
            await c.set(k, 'iso');
            return c.get(k);
        });
        assert.equal(got, 'iso');
    });
});

// ---- transactions (DESIGN.md section 4: MULTI...EXEC pins a backend connection) ---------------

describe('transactions', () => {
    it('ioredis multi().exec()', async () => {
        const c = ioredisClient();
        const k = `cache:io:${RUN}:tx`;
        try {
            let got;
            try {
                got = await c.multi().set(k, '1').incr(k).get(k).exec();
            } catch (err) {
                assert.fail(`KEYGATE BUG: ioredis multi().set().incr().get().exec() (MULTI / SET / INCR / GET / EXEC) ` +
                    `rejected with ${err.name}: ${err.message}; expected [[null,'OK'],[null,2],[null,'2']]`);
            }
            assert.deepEqual(got, [[null, 'OK'], [null, 2], [null, '2']]);
        } finally {
            await c.quit();
        }
    });

    it('node-redis multi().exec()', async () => {
        const c = await nodeRedisClient();
        const k = `cache:nr:${RUN}:tx`;
        try {
            let got;
            try {
                got = await c.multi().set(k, '1').incr(k).get(k).exec();
            } catch (err) {
                assert.fail(`KEYGATE BUG: node-redis multi().set().incr().get().exec() (MULTI / SET / INCR / GET / EXEC) ` +
                    `rejected with ${err.constructor.name}: ${err.message}; expected ['OK', 2, '2']`);
            }
            assert.deepEqual(got, ['OK', 2, '2']);
        } finally {
            await c.quit().catch(() => c.disconnect());
        }
    });
});

// ---- SCAN with a MATCH inside one namespace (DESIGN.md section 3 refuses only the others) -----

describe('scan', () => {
    it('ioredis scanStream and node-redis scanIterator find the keys', async () => {
        const io = ioredisClient();
        const nr = await nodeRedisClient();
        const base = `cache:scan:${RUN}`;
        try {
            await Promise.all(Array.from({ length: 50 }, (_, i) => io.set(`${base}:${i}`, i)));
            const want = Array.from({ length: 50 }, (_, i) => `${base}:${i}`).sort();
            const fromIo = new Set();
            for await (const batch of io.scanStream({ match: `${base}:*`, count: 10 })) batch.forEach((k) => fromIo.add(k));
            assert.deepEqual([...fromIo].sort(), want, 'ioredis scanStream');
            const fromNr = new Set();
            for await (const k of nr.scanIterator({ MATCH: `${base}:*`, COUNT: 10 })) fromNr.add(k);
            assert.deepEqual([...fromNr].sort(), want, 'node-redis scanIterator');
        } finally {
            await io.quit();
            await nr.quit();
        }
    });
});

// ---- issue 13: the commands clients send at start-up, RESET, keyless commands ---------------

// keygate's own error replies so far (INFO stats errors_*): a start-up command it refused counts there.
async function keygateErrors() {
    const io = ioredisClient();
    try {
        const stats = await io.info('stats');
        return [...stats.matchAll(/^errors_\w+:(\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
    } finally {
        io.disconnect();
    }
}

describe('start-up commands (issue 13)', () => {
    it('ioredis: CLIENT SETINFO, SETNAME and the INFO ready check answer without error', async () => {
        const before = await keygateErrors();
        const r = ioredisClient({ connectionName: 'io-start' });
        const durable = ioredisDirect('durable');
        try {
            await new Promise((ok, fail) => { r.once('ready', ok); r.once('end', fail); });
            assert.equal(await r.client('GETNAME'), 'io-start');
            assert.equal(await r.select(0), 'OK');
            assert.equal(await r.call('READONLY'), 'OK');
            assert.equal(await r.call('READWRITE'), 'OK');
            assert.equal(await r.echo('start'), 'start');
            assert.equal(await r.ping('hello'), 'hello');
            assert.match(await r.info('server'), /^redis_mode:standalone/m);
            assert.deepEqual(await r.call('COMMAND', 'DOCS', 'GET'), await durable.call('COMMAND', 'DOCS', 'GET'));
        } finally {
            r.disconnect();
            durable.disconnect();
        }
        assert.equal(await keygateErrors(), before, 'a start-up command got an error from keygate');
    });

    it('ioredis: RESET and the keyless commands', async () => {
        const r = ioredisClient({ connectionName: 'io-reset' });
        const cache = ioredisDirect('cache'), durable = ioredisDirect('durable');
        try {
            assert.equal(await r.set(`q:io:${RUN}:kl`, '1'), 'OK');
            assert.equal(await r.call('RESET'), 'RESET');
            assert.equal(await r.client('GETNAME'), null);
            assert.equal(await r.dbsize(), (await durable.dbsize()) + (await cache.dbsize()));
            assert.equal(await r.lastsave(), await durable.lastsave());
            const [s] = await r.time();
            const [ds] = await durable.time();
            assert.ok(Math.abs(Number(s) - Number(ds)) <= 1, `TIME ${s}, durable's ${ds}`);
            assert.equal(await r.wait(0, 0), 0);
            await assert.rejects(r.randomkey(), /^ReplyError: DENIED/);
        } finally {
            r.disconnect();
            cache.disconnect();
            durable.disconnect();
        }
    });

    it('node-redis v4: READONLY, CLIENT SETINFO and SETNAME on connect answer without error', async () => {
        const before = await keygateErrors();
        const c = await nodeRedisClient({ name: 'nr-start', readonly: true, database: 0 });
        const durable = await nodeRedisDirect('durable');
        try {
            assert.equal(await c.clientGetName(), 'nr-start');
            assert.equal(await c.sendCommand(['SELECT', '0']), 'OK');
            assert.equal(await c.echo('start'), 'start');
            assert.equal(await c.ping('hello'), 'hello');
            assert.match(await c.info('server'), /^redis_mode:standalone/m);
            assert.deepEqual(await c.sendCommand(['COMMAND', 'DOCS', 'GET']),
                await durable.sendCommand(['COMMAND', 'DOCS', 'GET']));
        } finally {
            await c.quit();
            await durable.quit();
        }
        assert.equal(await keygateErrors(), before, 'a start-up command got an error from keygate');
    });

    it('node-redis v4: RESET and the keyless commands', async () => {
        const c = await nodeRedisClient({ name: 'nr-reset' });
        const durable = await nodeRedisDirect('durable'), cache = await nodeRedisDirect('cache');
        try {
            assert.equal(await c.set(`cache:nr:${RUN}:kl`, '1'), 'OK');
            assert.equal(await c.sendCommand(['RESET']), 'RESET');
            assert.equal(await c.clientGetName(), null);
            assert.equal(await c.dbSize(), (await durable.dbSize()) + (await cache.dbSize()));
            assert.equal((await c.lastSave()).getTime(), (await durable.lastSave()).getTime());
            assert.equal(await c.sendCommand(['WAIT', '0', '0']), 0);
            await assert.rejects(c.sendCommand(['FLUSHDB']), /DENIED/);
        } finally {
            await c.quit();
            await durable.quit();
            await cache.quit();
        }
    });
});
