//! Counters of the segment-grouping cache, with their names (one list: the table
//! saves them by name, `patio cache stat` and `--stats-json` show them by name).

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// What the cache did during one mount.
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct CacheStats {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl CacheStats {
            /// Every counter by name, in declaration order.
            pub fn named(&self) -> Vec<(String, u64)> {
                vec![$((stringify!($name).to_string(), self.$name),)*]
            }

            /// Counters from `named` (unknown names ignored, missing ones 0).
            pub fn from_named(named: &[(String, u64)]) -> Self {
                let mut s = CacheStats::default();
                for (k, v) in named {
                    match k.as_str() {
                        $(stringify!($name) => s.$name = *v,)*
                        _ => {}
                    }
                }
                s
            }
        }
    };
}

counters! {
    /// Read requests served through the cache.
    reads,
    /// Item lookups (one per item a read touches, or per run read from SOURCE).
    accesses,
    /// Lookups served by a grouped item: from memory after a segment brought it, or
    /// from the segment store.
    group_hits,
    /// Lookups served from memory by an item that no group brought (and every hit of
    /// `lru`).
    plain_hits,
    /// Lookups that read SOURCE.
    misses,
    /// Bytes delivered to readers from memory, from the segment store, from SOURCE.
    bytes_from_memory,
    bytes_from_segments,
    bytes_from_source,
    /// Requests made to SOURCE (through the storage model) and their bytes.
    source_requests,
    source_bytes,
    /// Slot reads and writes of the segment store and their bytes.
    segment_reads,
    segment_read_bytes,
    segment_writes,
    segment_write_bytes,
    /// All grouping I/O: `grouping_source_bytes` + `grouping_local_bytes`.
    grouping_io_bytes,
    /// SOURCE bytes read for group members nobody asked for yet.
    grouping_source_bytes,
    /// Bytes moved locally to build segments: members read back from other slots of
    /// the store, plus the segment bytes written.
    grouping_local_bytes,
    /// Nanoseconds spent on work in idle periods (group rebuilds, segment builds
    /// and writes, table saves): work no reader waited for, but work all the same.
    idle_work_ns,
    /// Batches of a strided stream's next periods brought ahead, and their SOURCE
    /// bytes (part of `grouping_source_bytes`).
    stride_batches,
    stride_bytes,
    /// Times the groups were rebuilt; groups new in a rebuild; groups found already
    /// stored whole in one segment.
    group_builds,
    groups_built,
    groups_reused,
    /// Slots reused for new contents while holding items.
    evicted_segments,
    /// Cached items dropped because a write, truncation or outside change hit them.
    invalidated_items,
    /// Files found changed outside the mount (size, mtime, ctime or inode).
    stale_files,
    /// Stored items whose checksum did not match (served from SOURCE instead).
    checksum_misses,
    /// Most bytes held in memory at once.
    peak_memory_bytes,
    /// Items restored from a saved table at start.
    warm_items,
    /// Table saves.
    table_saves,
}

impl CacheStats {
    /// Lookups served by groups / all lookups.
    pub fn group_hit_rate(&self) -> f64 {
        ratio(self.group_hits, self.accesses)
    }

    /// Bytes delivered to readers, from any tier.
    pub fn delivered(&self) -> u64 {
        self.bytes_from_memory + self.bytes_from_segments + self.bytes_from_source
    }

    /// Grouping I/O / bytes delivered to readers.
    pub fn grouping_io_ratio(&self) -> f64 {
        ratio(self.grouping_io_bytes, self.delivered())
    }

    /// Lookups served by either tier / all lookups.
    pub fn hit_rate(&self) -> f64 {
        ratio(self.group_hits + self.plain_hits, self.accesses)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}
