// keygate as a tracking server for a real client-side cache (issue 32): node-redis v5 (npm redis@5,
// as `redis5`) with RESP: 3 and clientSideCache, unmodified.
//
// tests/clients/run runs this file with the other node files, one file at a time (keygate's
// commands_forwarded counter must not move under another file's commands). Variables as
// test_node_resp3.mjs: KG_PORT (keygate, plain, no AUTH), KG_CACHE_PORT/KG_CACHE_PASS (the cache
// backend's plain port). Checked: repeated GETs of a cached key are answered from the client's
// memory (its cache's hitCount grows, keygate's commands_forwarded does not move); a write through
// keygate invalidates the entry (the next GET reads the new value from keygate); so does a write
// made directly to the backend (keygate's feed of Redis's own tracking).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';

import { createClient, BasicClientSideCache } from 'redis5';

const env = (name) => {
    const v = process.env[name];
    if (!v) throw new Error(`${name} is not set; run tests/clients/run`);
    return v;
};
const PORT = Number(env('KG_PORT'));
const CACHE = { port: Number(env('KG_CACHE_PORT')), password: env('KG_CACHE_PASS') };
const RUN = randomUUID().slice(0, 8);

async function connect(opts) {
    const c = createClient({ socket: { host: '127.0.0.1', reconnectStrategy: false }, ...opts });
    c.on('error', () => {});
    await c.connect();
    return c;
}

// keygate's commands_forwarded (INFO stats), asked on a connection without a cache.
async function forwarded(c) {
    const info = await c.info('stats');
    return Number(/commands_forwarded:(\d+)/.exec(info)[1]);
}

// Wait until cond() resolves true, at most ms.
async function until(cond, ms, what) {
    const end = Date.now() + ms;
    while (!(await cond())) {
        if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 5));
    }
}

describe('node-redis v5 clientSideCache through keygate (RESP3, CLIENT TRACKING)', () => {
    let cached, plain, direct, cache;

    before(async () => {
        cache = new BasicClientSideCache({ ttl: 0, maxEntries: 0 });
        [cached, plain, direct] = await Promise.all([
            connect({ RESP: 3, socket: { host: '127.0.0.1', port: PORT, reconnectStrategy: false }, clientSideCache: cache }),
            connect({ RESP: 3, socket: { host: '127.0.0.1', port: PORT, reconnectStrategy: false } }),
            connect({ socket: { host: '127.0.0.1', port: CACHE.port, reconnectStrategy: false }, password: CACHE.password }),
        ]);
    });

    after(async () => {
        await Promise.allSettled([cached, plain, direct].map((c) => c.quit()));
    });

    it('hits are served from its memory: keygate forwards nothing', async () => {
        const k = `cache:csc:${RUN}:hot`;
        assert.equal(await plain.set(k, 'v1'), 'OK');
        assert.equal(await cached.get(k), 'v1'); // a miss: read through keygate, remembered there
        const hits0 = cache.stats().hitCount;
        const f0 = await forwarded(plain);
        for (let i = 0; i < 1000; i++) assert.equal(await cached.get(k), 'v1');
        const f1 = await forwarded(plain);
        assert.equal(f1 - f0, 0, `keygate forwarded ${f1 - f0} commands for 1000 cached GETs`);
        assert.equal(cache.stats().hitCount - hits0, 1000);
    });

    it('a write through keygate invalidates the entry', async () => {
        const k = `cache:csc:${RUN}:w`;
        assert.equal(await plain.set(k, 'old'), 'OK');
        assert.equal(await cached.get(k), 'old');
        assert.equal(await cached.get(k), 'old'); // cached
        const t0 = process.hrtime.bigint();
        assert.equal(await plain.set(k, 'new'), 'OK');
        await until(async () => (await cached.get(k)) === 'new', 2000, 'the new value after a write through keygate');
        const ms = Number(process.hrtime.bigint() - t0) / 1e6;
        console.log(`node-redis clientSideCache: a write through keygate seen in ${ms.toFixed(2)} ms`);
    });

    it('measured: a hot key read from the cache, through keygate, directly (p50/p99, printed)', async () => {
        const k = `cache:csc:${RUN}:lat`;
        assert.equal(await plain.set(k, 'v'), 'OK');
        assert.equal(await cached.get(k), 'v');
        const N = 2000;
        const pct = async (c) => {
            const t = [];
            for (let i = 0; i < N; i++) {
                const t0 = process.hrtime.bigint();
                await c.get(k);
                t.push(Number(process.hrtime.bigint() - t0) / 1000);
            }
            t.sort((a, b) => a - b);
            return `p50 ${t[N / 2].toFixed(1)} us, p99 ${t[Math.floor(N * 0.99)].toFixed(1)} us`;
        };
        console.log(`hot GET over ${N} reads: node-redis clientSideCache hit ${await pct(cached)}; ` +
            `through keygate ${await pct(plain)}; direct Redis ${await pct(direct)}`);
        // the invalidation lag of a write through keygate, seen by the cache (the next GET misses)
        const lags = [];
        for (let i = 0; i < 200; i++) {
            const kk = `cache:csc:${RUN}:lag${i}`;
            await cached.get(kk);
            const t0 = process.hrtime.bigint();
            await plain.set(kk, 'x');
            await until(async () => (await cached.get(kk)) === 'x', 2000, 'the write seen');
            lags.push(Number(process.hrtime.bigint() - t0) / 1000);
        }
        lags.sort((a, b) => a - b);
        console.log(`write through keygate -> the cache reads the new value: p50 ${lags[100].toFixed(1)} us, ` +
            `p99 ${lags[198].toFixed(1)} us (200 writes; includes the SET and the GET round trips)`);
    });

    it('a write made directly to Redis invalidates the entry (keygate follows Redis tracking)', async () => {
        const k = `cache:csc:${RUN}:d`;
        assert.equal(await plain.set(k, 'old'), 'OK');
        assert.equal(await cached.get(k), 'old');
        assert.equal(await direct.set(k, 'direct', { EX: 3600 }), 'OK');
        await until(async () => (await cached.get(k)) === 'direct', 2000, 'the new value after a direct write');
    });
});
