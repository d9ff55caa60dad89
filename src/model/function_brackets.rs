//! Kernel functions whose entry and return have tracepoints of their own:
//! the recorder enables them for `record --func`, the analysis times every
//! call between them (`analyze::functions`).

/// Functions whose entry and return have tracepoints of their own:
/// (function, entry event, return event).
pub const BRACKETS: &[(&str, &str, &str)] = &[
    (
        "ext4_sync_file",
        "ext4_sync_file_enter",
        "ext4_sync_file_exit",
    ),
    (
        "ext4_fallocate",
        "ext4_fallocate_enter",
        "ext4_fallocate_exit",
    ),
    ("ext4_truncate", "ext4_truncate_enter", "ext4_truncate_exit"),
    ("ext4_unlink", "ext4_unlink_enter", "ext4_unlink_exit"),
    (
        "ext4_writepages",
        "ext4_writepages",
        "ext4_writepages_result",
    ),
    (
        "ext4_ext_map_blocks",
        "ext4_ext_map_blocks_enter",
        "ext4_ext_map_blocks_exit",
    ),
    (
        "ext4_ind_map_blocks",
        "ext4_ind_map_blocks_enter",
        "ext4_ind_map_blocks_exit",
    ),
    (
        "ext4_es_lookup_extent",
        "ext4_es_lookup_extent_enter",
        "ext4_es_lookup_extent_exit",
    ),
];

/// The entry and return tracepoints of a function that has them, as
/// tracefs names their directories (`ext4/…`).
pub fn brackets_of(function: &str) -> Option<(String, String)> {
    BRACKETS
        .iter()
        .find(|(f, _, _)| *f == function)
        .map(|(_, enter, exit)| (format!("ext4/{enter}"), format!("ext4/{exit}")))
}
