package cluster

import "go.etcd.io/etcd/server/v3/storage/wal"

// walSegmentBytes is the size of each WAL segment an etcd member
// preallocates. etcd's default, 64 MB, with the next segment preallocated
// ahead too, put 128 MB on disk per member before it wrote anything: 366 MiB
// for three members, however short the run. A run writes little WAL: about
// 1.3 KB/s per member under --nemesis all, 5 KB/s with 20 clients on 4
// locks (measured), so a default run fits in one segment of 256 KiB and a
// 30-minute run cuts a few dozen, a fsync and a rename each.
const walSegmentBytes = 256 << 10

// sizeWAL sets the WAL segment size of the members this process runs: a
// package variable of etcd's, set in init, before any member starts (an
// embedded one, or this binary re-run as a member process).
func sizeWAL() { wal.SegmentSizeBytes = walSegmentBytes }
