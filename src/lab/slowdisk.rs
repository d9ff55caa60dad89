//! A disk that stalls on purpose, like the measured eMMC whose journal writes stalled 150–270 ms: a FUSE file system,
//! served by iosleuth itself, with one file (`disk.img`) backed by a real
//! file, that holds every Nth write for a while. A loop device over that
//! file is a block device whose requests sometimes take 150 ms, with the
//! CPU idle meanwhile.
//!
//! Opened with FOPEN_DIRECT_IO, so that the loop device's writes reach the
//! server one by one instead of stopping in the page cache; served by one
//! thread, so that a held write holds the whole device, as a stalled
//! device does.

use crate::capture::tracefs::CaptureError;
use fuser::{
    BackgroundSession, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, INodeNo,
    InitFlags, KernelConfig, LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyWrite, Request, WriteFlags,
};
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

pub const IMAGE: &str = "disk.img";
const IMAGE_INO: INodeNo = INodeNo(2);

/// Which writes (or reads) stall, and for how long.
#[derive(Clone, Copy, Debug)]
pub struct Stall {
    /// Every `every`-th write is held.
    pub every: u64,
    pub delay: Duration,
    /// Hold every `every`-th read instead (counted as the writes are).
    pub reads: bool,
    /// Every read and write takes this long, as a device's own service
    /// time (zero: as long as the copy).
    pub service: Duration,
    /// Requests served at once (the server's threads), as an SSD's
    /// channels serve them; 1: one held request holds the whole device.
    pub lanes: usize,
}

impl Stall {
    /// Every `every`-th write held for `delay`, one request at a time.
    pub fn writes(every: u64, delay: Duration) -> Stall {
        Stall {
            every,
            delay,
            reads: false,
            service: Duration::ZERO,
            lanes: 1,
        }
    }

    /// No stall: each request served in `service`, `lanes` at once.
    pub fn parallel(service: Duration, lanes: usize) -> Stall {
        Stall {
            service,
            lanes: lanes.max(1),
            ..Stall::writes(0, Duration::ZERO)
        }
    }
}

struct SlowFs {
    backing: File,
    size: u64,
    stall: Stall,
    writes: Arc<AtomicU64>,
    stalled: Arc<AtomicU64>,
    /// Only writes that start in [from, to) count (bytes); to = 0: all.
    region: Arc<(AtomicU64, AtomicU64)>,
}

impl SlowFs {
    /// The device's own time for one request.
    fn serve(&self) {
        if !self.stall.service.is_zero() {
            std::thread::sleep(self.stall.service);
        }
    }

    fn attr(&self, ino: INodeNo) -> FileAttr {
        let dir = ino == INodeNo::ROOT;
        FileAttr {
            ino,
            size: if dir { 0 } else { self.size },
            blocks: if dir { 0 } else { self.size / 512 },
            atime: SystemTime::UNIX_EPOCH,
            mtime: SystemTime::UNIX_EPOCH,
            ctime: SystemTime::UNIX_EPOCH,
            crtime: SystemTime::UNIX_EPOCH,
            kind: if dir {
                FileType::Directory
            } else {
                FileType::RegularFile
            },
            perm: if dir { 0o755 } else { 0o600 },
            nlink: if dir { 2 } else { 1 },
            uid: 0,
            gid: 0,
            rdev: 0,
            flags: 0,
            blksize: 4096,
        }
    }
}

const TTL: Duration = Duration::from_secs(3600);

impl Filesystem for SlowFs {
    /// Asynchronous direct I/O: the loop device's requests (with direct
    /// I/O on) then reach the server without each waiting for the one
    /// before, as many at once as there are lanes.
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        if self.stall.lanes > 1 {
            let _ = config.add_capabilities(InitFlags::FUSE_ASYNC_DIO);
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent == INodeNo::ROOT && name == IMAGE {
            reply.entry(&TTL, &self.attr(IMAGE_INO), fuser::Generation(0));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        if ino == INodeNo::ROOT || ino == IMAGE_INO {
            reply.attr(&TTL, &self.attr(ino));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if ino == IMAGE_INO {
            // Parallel direct writes: without it the kernel serves a
            // file's direct writes one at a time (under the inode's lock).
            let flags = if self.stall.lanes > 1 {
                FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
            } else {
                FopenFlags::FOPEN_DIRECT_IO
            };
            reply.opened(FileHandle(0), flags);
        } else {
            reply.error(Errno::EISDIR);
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.serve();
        if self.stall.reads {
            let n = self.writes.fetch_add(1, Ordering::Relaxed) + 1;
            if self.stall.every > 0 && n.is_multiple_of(self.stall.every) {
                self.stalled.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(self.stall.delay);
            }
        }
        let len = (size as u64).min(self.size.saturating_sub(offset)) as usize;
        let mut buf = vec![0u8; len];
        match self.backing.read_exact_at(&mut buf, offset) {
            Ok(()) => reply.data(&buf),
            Err(_) => reply.error(Errno::EIO),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        self.serve();
        let (from, to) = (
            self.region.0.load(Ordering::Relaxed),
            self.region.1.load(Ordering::Relaxed),
        );
        let counted = !self.stall.reads && (to == 0 || (from..to).contains(&offset));
        let n = if counted {
            self.writes.fetch_add(1, Ordering::Relaxed) + 1
        } else {
            0
        };
        if counted && self.stall.every > 0 && n % self.stall.every == 0 {
            self.stalled.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(self.stall.delay);
        }
        if offset + data.len() as u64 > self.size {
            return reply.error(Errno::ENOSPC);
        }
        match self.backing.write_all_at(data, offset) {
            Ok(()) => reply.written(data.len() as u32),
            Err(_) => reply.error(Errno::EIO),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // The backing file is scratch: durability is not what is measured.
        reply.ok();
    }
}

/// The mounted slow file system. Unmounted on drop.
pub struct SlowDisk {
    /// Where it is mounted; the image is `mnt/disk.img`.
    pub mnt: PathBuf,
    writes: Arc<AtomicU64>,
    stalled: Arc<AtomicU64>,
    region: Arc<(AtomicU64, AtomicU64)>,
    session: Option<BackgroundSession>,
}

impl SlowDisk {
    /// Serves `backing` (a file of `size` bytes) as `mnt/disk.img`.
    pub fn mount(backing: &Path, mnt: &Path, stall: Stall) -> Result<SlowDisk, CaptureError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(backing)?;
        let size = file.metadata()?.len();
        std::fs::create_dir_all(mnt)?;
        let writes = Arc::new(AtomicU64::new(0));
        let stalled = Arc::new(AtomicU64::new(0));
        let region = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
        let fs = SlowFs {
            region: region.clone(),
            backing: file,
            size,
            stall,
            writes: writes.clone(),
            stalled: stalled.clone(),
        };
        let mut cfg = fuser::Config::default();
        cfg.n_threads = Some(stall.lanes.max(1));
        cfg.mount_options = vec![
            MountOption::FSName("iosleuth-slowdisk".into()),
            MountOption::RW,
        ];
        let session = fuser::spawn_mount(fs, mnt, &cfg).map_err(|e| {
            CaptureError::Unusable(format!(
                "cannot mount the slow disk's FUSE file system on {}: {e} (needs root and /dev/fuse)",
                mnt.display()
            ))
        })?;
        Ok(SlowDisk {
            mnt: mnt.to_path_buf(),
            writes,
            stalled,
            region,
            session: Some(session),
        })
    }

    pub fn image(&self) -> PathBuf {
        self.mnt.join(IMAGE)
    }

    /// From now on, count (and hold) only writes that start in `bytes`:
    /// the journal's blocks, say.
    pub fn stall_only(&self, bytes: std::ops::Range<u64>) {
        self.region.0.store(bytes.start, Ordering::Relaxed);
        self.region.1.store(bytes.end, Ordering::Relaxed);
    }

    /// Writes (reads, for a read stall) counted, and how many were held.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.writes.load(Ordering::Relaxed),
            self.stalled.load(Ordering::Relaxed),
        )
    }
}

impl Drop for SlowDisk {
    fn drop(&mut self) {
        if let Some(s) = self.session.take() {
            let _ = s.umount_and_join();
        }
    }
}
