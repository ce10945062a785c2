/* slotmap.h: a Redis Cluster's slot map as data: key -> slot (CRC16, hash tags), slot -> primary, from CLUSTER SLOTS / CLUSTER SHARDS replies and redirections. Pure. */
#ifndef KEYGATE_SLOTMAP_H
#define KEYGATE_SLOTMAP_H

#include <stddef.h>
#include <stdint.h>

/*
 * No I/O: every function reads bytes the caller hands it (whole RESP2 replies, as
 * resp_scan_reply framed them) and a struct slotmap the caller owns. Hosts are stored as
 * Redis names them, IPv6 addresses without brackets ("::1"), at most SLOTMAP_HOST_MAX - 1
 * bytes. Node indexes are stable for the life of a map: slotmap_set_owner only appends,
 * and a parse replaces the whole map.
 */

#define SLOTMAP_SLOTS 16384
#define SLOTMAP_MAX_NODES 128
#define SLOTMAP_HOST_MAX 256

struct slotmap_node {
    char host[SLOTMAP_HOST_MAX];
    int port;
    uint64_t id; /* a number for the address, set with it (slotmap_node_set): equal addresses, equal ids */
};

struct slotmap {
    struct slotmap_node nodes[SLOTMAP_MAX_NODES]; /* primaries (and nodes learned from redirects) */
    int nnodes;
    int16_t owner[SLOTMAP_SLOTS]; /* index into nodes; -1: slot not served */
};

/* Empty: no node, every slot -1. */
void slotmap_init(struct slotmap *m);

/* Redis's keyHashSlot: CRC16-XMODEM of the key, or of the hash tag (text between the first '{'
 * and the first '}' after it, when non-empty) mod 16384. Any bytes; len 0 is slot 0. */
unsigned slotmap_key_slot(const char *key, size_t len);

/* The CRC16 (XMODEM: poly 0x1021, init 0) Redis Cluster hashes with: "123456789" -> 0x31C3. */
uint16_t slotmap_crc16(const char *buf, size_t len);

/*
 * Replace m with the map in a whole RESP2 reply of CLUSTER SLOTS (reply, len: one framed
 * reply). 0 on success; -1 with err filled ("CLUSTER SLOTS: ...": an error reply, a malformed
 * shape, a slot in two ranges, more than SLOTMAP_MAX_NODES primaries), m then unchanged.
 * Only the primary (first node entry) of each range counts; its extra fields (id, metadata)
 * are ignored but for one case: an empty host ("", "?" or a null bulk: Redis does not know
 * the endpoint) means "the address keygate used to ask": asked_host, except that a "?"
 * (cluster-preferred-endpoint-type hostname, the node has none) whose metadata carries the
 * node's "ip" uses that ip. asked_host may be NULL when the caller has none (such a reply is
 * then an error). Slots no range names stay -1. The ports are those of the transport the
 * question came on: with tls-cluster yes, Redis 7.0 answers a TLS connection with the nodes'
 * TLS ports and a plain one with their plain ports (MOVED / ASK likewise).
 */
int slotmap_parse_slots(struct slotmap *m, const char *reply, size_t len, const char *asked_host, char *err,
                        size_t errlen) __attribute__((warn_unused_result));

/*
 * The same from CLUSTER SHARDS (RESP2: an array of maps as flat arrays: "slots" [start end ...],
 * "nodes" [ {id, port, tls-port, ip, endpoint, hostname, role, replication-offset, health ...} ]).
 * The primary is the node with role "master" (the first "online" one when a shard lists
 * several, else the first); its address is "endpoint", falling back to "ip" when the endpoint
 * is absent or "?", and to asked_host when the endpoint is "" (unknown-endpoint) or no usable
 * address is left; its port "tls-port" when want_tls, else "port" (Redis 7.0 lists only the
 * ports the node has: a missing one is an error). Shards with no slots (a failed-over old
 * primary) are skipped, and need no primary. Errors and m as slotmap_parse_slots.
 */
int slotmap_parse_shards(struct slotmap *m, const char *reply, size_t len, int want_tls, const char *asked_host,
                         char *err, size_t errlen) __attribute__((warn_unused_result));

/* Node index owning slot (< SLOTMAP_SLOTS), or -1. */
int slotmap_owner(const struct slotmap *m, unsigned slot);

/* Index of the node host:port (exact bytes, unbracketed IPv6), or -1. */
int slotmap_find_node(const struct slotmap *m, const char *host, int port);

/* n becomes the node host[0..hlen):port (hlen < SLOTMAP_HOST_MAX), its id computed from the address. */
void slotmap_node_set(struct slotmap_node *n, const char *host, size_t hlen, int port);

/* One slot (< SLOTMAP_SLOTS) now belongs to host:port (a -MOVED): the node is found or added.
 * Returns its index, or -1 when the table is full or host does not fit (m unchanged). */
int slotmap_set_owner(struct slotmap *m, unsigned slot, const char *host, int port);

/*
 * "-MOVED 3999 127.0.0.1:6381\r\n" / "-ASK 3999 [::1]:6381\r\n" (a whole error reply, as
 * framed). 1 when it is one (out filled), 0 when not (any other reply, a malformed redirect:
 * slot out of range, port not in 1..65535, a host that does not fit, anything after the port).
 * IPv6 addresses may appear as "::1:6381" (Redis prints ip:port with the last ':' separating
 * the port) or bracketed; out->host holds them unbracketed. An empty host (":6381", Redis's
 * unknown-endpoint, and "?:6381", a hostname endpoint the node lacks) gives out->host "": the
 * caller uses the address it asked, at out->port.
 */
enum slotmap_redirect_kind { SLOTMAP_MOVED = 1, SLOTMAP_ASK = 2 };
struct slotmap_redirect {
    enum slotmap_redirect_kind kind;
    unsigned slot;
    char host[SLOTMAP_HOST_MAX];
    int port;
};
int slotmap_parse_redirect(const char *reply, size_t len, struct slotmap_redirect *out);

/* Of the keys (pointers, lengths), the slot all share: 0..16383, or -1 when they span slots
 * (CROSSSLOT), -2 when n == 0. */
int slotmap_common_slot(const char *const *keys, const size_t *lens, size_t n);

/*
 * SCAN over every primary of a cluster with one cursor to the client: the cursor a client sees
 * carries the rank of the node it scans (its place among the primaries ordered by address, at
 * most SLOTMAP_MAX_NODES) in its low SLOTMAP_SCAN_RANK_BITS bits and that node's own cursor
 * above them. Cursor 0 is node 0's start; when a node's SCAN ends (its cursor 0) the client's
 * next cursor is the next rank's start, and 0 after the last node.
 */
#define SLOTMAP_SCAN_RANK_BITS 7
_Static_assert((1 << SLOTMAP_SCAN_RANK_BITS) >= SLOTMAP_MAX_NODES, "a node rank fits its bits");

/* Split a client's cursor into the rank of the node to scan and that node's cursor. */
void slotmap_scan_cursor_split(uint64_t cursor, unsigned *rank, uint64_t *node_cursor);

/* The client's next cursor after node `rank` (of nnodes) answered node_cursor. 0 on success;
 * -1 when node_cursor does not fit beside the rank (a table of more than 2^56 buckets). */
int slotmap_scan_cursor_next(uint64_t node_cursor, unsigned rank, unsigned nnodes, uint64_t *out)
    __attribute__((warn_unused_result));

#endif
