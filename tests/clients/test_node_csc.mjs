// keygate as a tracking server for a real client-side cache (issue 32): node-redis v5 (npm redis@5,
// as `redis5`) with RESP: 3 and clientSideCache, unmodified.
//
// tests/clients/run runs this file with the other node files, one file at a time (keygate's
// commands_forwarded counter must not move under another file's commands). Variables as
// test_node_resp3.mjs: KG_PORT (keygate, plain, no AUTH), KG_CACHE_PORT/KG_CACHE_PASS (the cache
// backend's plain port). Checked: repeated GETs of a cached key are answered from the client's
// memory (its cache's hitCount grows, keygate's commands_forwarded does not move); a write through
// keygate invalidates the entry (the next GET reads the new value from keygate); so does a write
// made directly to the backend (keygate's feed of Redis's own tracking), and one through a second
// keygate (KG_PEER_PORT). Measured (printed): a hot key read from the client's cache, from
// keygate's near cache (the launcher's near-cache namespace nc:), forwarded, directly; the lag
// from a write through the second keygate to the cache's invalidation.
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
const PEER_PORT = Number(env('KG_PEER_PORT'));
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

// keygate's near-cache hits of namespace prefix (INFO nearcache), asked on c.
async function nearHits(c, prefix) {
    const info = await c.info('nearcache');
    const m = new RegExp(`nc_${prefix}:hits=(\\d+)`).exec(info);
    return m ? Number(m[1]) : -1;
}

// p50 and p99 of n awaited calls of fn, in microseconds.
async function percentiles(n, fn) {
    const t = [];
    for (let i = 0; i < n; i++) {
        const t0 = process.hrtime.bigint();
        await fn();
        t.push(Number(process.hrtime.bigint() - t0) / 1000);
    }
    t.sort((a, b) => a - b);
    return `p50 ${t[Math.floor(n / 2)].toFixed(1)} us, p99 ${t[Math.floor(n * 0.99)].toFixed(1)} us`;
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
    let cached, plain, direct, cache, peer;

    before(async () => {
        cache = new BasicClientSideCache({ ttl: 0, maxEntries: 0 });
        [cached, plain, direct, peer] = await Promise.all([
            connect({ RESP: 3, socket: { host: '127.0.0.1', port: PORT, reconnectStrategy: false }, clientSideCache: cache }),
            connect({ RESP: 3, socket: { host: '127.0.0.1', port: PORT, reconnectStrategy: false } }),
            connect({ socket: { host: '127.0.0.1', port: CACHE.port, reconnectStrategy: false }, password: CACHE.password }),
            connect({ RESP: 3, socket: { host: '127.0.0.1', port: PEER_PORT, reconnectStrategy: false } }),
        ]);
    });

    after(async () => {
        await Promise.allSettled([cached, plain, direct, peer].map((c) => c.quit()));
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
        // a key of the near-cache namespace: served from keygate's memory once its stream reader
        // vouches (hits counted in INFO nearcache)
        const nk = `nc:csc:${RUN}:lat`;
        assert.equal(await plain.set(nk, 'v'), 'OK');
        await until(async () => {
            const h0 = await nearHits(plain, 'nc:');
            await plain.get(nk);
            return h0 >= 0 && (await nearHits(plain, 'nc:')) > h0;
        }, 5000, 'a near-cache hit on keygate');
        const N = 2000;
        const pct = (c, key) => percentiles(N, () => c.get(key));
        const nh0 = await nearHits(plain, 'nc:');
        const near = await pct(plain, nk);
        const nearHit = (await nearHits(plain, 'nc:')) - nh0;
        assert.equal(nearHit, N, `near-cache hits over ${N} reads: ${nearHit}`);
        console.log(`hot GET over ${N} reads: node-redis clientSideCache hit ${await pct(cached, k)}; ` +
            `keygate near-cache hit ${near}; through keygate (forwarded) ${await pct(plain, k)}; ` +
            `direct Redis ${await pct(direct, k)}`);
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

    it('a write through another keygate invalidates the entry (lag measured, printed)', async () => {
        // timed to the cache's 'invalidate' event for the key, from the SET sent to the second
        // keygate and from its reply (0 when the invalidation came first)
        const lags = [], sent = [];
        for (let i = 0; i < 200; i++) {
            const kk = `cache:csc:${RUN}:peer${i}`;
            assert.equal(await cached.get(kk), null);
            const seen = new Promise((resolve) => {
                const on = (key) => {
                    if (key === null || key.toString() !== kk) return;
                    cache.off('invalidate', on);
                    resolve(process.hrtime.bigint());
                };
                cache.on('invalidate', on);
            });
            let timer;
            const timeout = new Promise((_, reject) => {
                timer = setTimeout(() => reject(new Error(`no invalidation of ${kk} within 2 s`)), 2000);
            });
            const ts = process.hrtime.bigint();
            assert.equal(await peer.set(kk, 'b'), 'OK');
            const t0 = process.hrtime.bigint();
            const at = await Promise.race([seen, timeout]).finally(() => clearTimeout(timer));
            lags.push(Math.max(0, Number(at - t0) / 1000)); // an invalidation before B's reply: 0
            sent.push(Number(at - ts) / 1000);
            assert.equal(await cached.get(kk), 'b');
        }
        lags.sort((a, b) => a - b);
        sent.sort((a, b) => a - b);
        console.log(`write through keygate B -> node-redis clientSideCache on keygate A invalidated (200 writes): ` +
            `from B's reply p50 ${lags[100].toFixed(1)} us, p99 ${lags[198].toFixed(1)} us; ` +
            `from the SET sent to B p50 ${sent[100].toFixed(1)} us, p99 ${sent[198].toFixed(1)} us`);
    });

    it('a write made directly to Redis invalidates the entry (keygate follows Redis tracking)', async () => {
        const k = `cache:csc:${RUN}:d`;
        assert.equal(await plain.set(k, 'old'), 'OK');
        assert.equal(await cached.get(k), 'old');
        assert.equal(await direct.set(k, 'direct', { EX: 3600 }), 'OK');
        await until(async () => (await cached.get(k)) === 'direct', 2000, 'the new value after a direct write');
    });
});
