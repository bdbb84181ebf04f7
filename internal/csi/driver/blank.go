package driver

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// The blankness test of NodeStageVolume. mount-utils decides "format only when
// blank" with `blkid -p`, which costs a process and its probes' reads (7-11 ms of
// a 30 ms NodeStageVolume here, against 3 ms for the reads below). Most devices a
// node stages are new volumes whose every byte is zero, and blkid can only find a
// signature where a prober looks. So the driver reads those places itself: when
// they are all zero the device is blank for blkid too and is formatted at once;
// when anything is there the decision goes to mount-utils (blkid, fsck, the
// mismatch and partition checks) exactly as before.
//
// Blank means what it means to blkid and mount-utils: no signature blkid
// recognises. Bytes that no signature marks are protected by neither path: a
// device with data only outside the windows, or a filesystem whose primary
// superblock was zeroed or whose magic wipefs erased, is formatted whether the
// fast path or blkid decides. The fast path formats no device that blkid would
// report as holding something.
//
// The windows hold for the libblkid releases they were checked against (2.38 to
// 2.41), so whether the fast path is used is decided once per process, at run
// time (blankcheck.go, SystemMounter.BlankFastPath; the node plugin asks when it
// starts, in the background, and logs the decision). It is on only when `blkid
// --version` names a libblkid from windowsFrom to windowsTo and a self-check
// passes. The self-check makes each of ext4 and xfs (the filesystems the node
// makes) with the node's mkfs options on a sparse 1 GiB image in the temporary
// directory, and requires blkid to find it, and to find nothing once the windows
// are zeroed: blkid knows these filesystems by bytes inside the windows. The other
// signatures the windows list rest on the release range
// (TestSignatureWindowsCoverBlkid checks them against the test machine's blkid).
// The decision takes about 40 ms here; the self-check writes about 100 MB of page
// cache to files it deletes at once. When the fast path is off (no blkid, another
// release, an unreadable version, a failed self-check) every format decision runs
// blkid as mount-utils does. FormatAndMount reads the cached decision on each
// read-write call.

// window is a byte range of a device.
type window struct{ off, len int64 }

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
	// sigBlock is the unit windows are aligned to (direct I/O wants the logical
	// block size; 4 KiB covers 512 and 4096).
	sigBlock = 4 * kib
)

// signatureWindows returns, sorted, merged and within size, the ranges of a device
// of size bytes where libblkid (util-linux 2.38 to 2.41) looks for the magic of a
// filesystem, RAID or volume-manager member, encrypted volume or partition table:
//
//   - [0, 516 KiB): every magic below 512 KiB (ext*, xfs, btrfs at 64 KiB,
//     iso9660/udf from 32 KiB, swap up to 64 KiB, LVM2 sectors 0-3, bcache 4 KiB, md
//     1.1/1.2 at 0 and 4 KiB, MBR and GPT's primary header, UFS up to 256 KiB, ZFS
//     labels 0 and 1, LUKS2 secondary headers up to 512 KiB, UDF anchors);
//   - 4 KiB at 1, 2 and 4 MiB: LUKS2 secondary headers, VMFS (1 and 2 MiB),
//     bcachefs (2 MiB), UDF anchors of 2 and 4 KiB blocks;
//   - the last 512 KiB and the 256 KiB-misalignment of the size: ZFS labels 2 and 3,
//     GPT's backup header, md 0.90 and 1.0, DRBD, nilfs2's backup, and the ATA RAID
//     members in the last 257 sectors (adaptec, ddf, highpoint, isw, jmicron, lsi,
//     nvidia, silicon, via, promise but one);
//   - 8 KiB around 1 MiB before the end: bcachefs' end copy, UDF's last anchors;
//   - the sector 3087 sectors before the end: promise's furthest metadata.
//
// Probes that read further (HFS catalogs, NTFS MFT records, ZFS nvlists) do so only
// after a magic inside these windows matched.
func signatureWindows(size int64) []window {
	if size <= 0 {
		return nil
	}
	promise := (size/512 - 3087) * 512
	zfsEnd := size - 512*kib - size%(256*kib)
	ws := []window{
		{0, 512*kib + sigBlock},
		{mib, sigBlock},
		{2 * mib, sigBlock},
		{4 * mib, sigBlock},
		{promise, 512},
		{size - mib - sigBlock, 2 * sigBlock},
		{zfsEnd, size - zfsEnd},
	}
	var out []window
	for _, w := range ws {
		start, end := max(w.off, 0), min(w.off+w.len, size)
		start -= start % sigBlock
		end = min(end+(sigBlock-end%sigBlock)%sigBlock, size)
		if start >= end {
			continue
		}
		out = append(out, window{start, end - start})
	}
	slices.SortFunc(out, func(a, b window) int { return cmp.Compare(a.off, b.off) })
	merged := out[:0]
	for _, w := range out {
		if n := len(merged); n > 0 && w.off <= merged[n-1].off+merged[n-1].len {
			last := &merged[n-1]
			last.len = max(last.len, w.off+w.len-last.off)
			continue
		}
		merged = append(merged, w)
	}
	return merged
}

// allZero reports whether every byte of b is zero.
func allZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// deviceBlank reports whether every signature window of device is zero. It reads
// with O_DIRECT where it can (half the cost of going through the page cache of a
// loop device), else through the page cache (regular files on tmpfs).
func deviceBlank(device string) (bool, error) {
	f, err := os.OpenFile(device, os.O_RDONLY|unix.O_DIRECT, 0)
	if errors.Is(err, unix.EINVAL) {
		f, err = os.Open(device)
	}
	if err != nil {
		return false, fmt.Errorf("check %s for signatures: %w", device, err)
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return false, fmt.Errorf("check %s for signatures: size: %w", device, err)
	}
	ws := signatureWindows(size)
	var longest int64
	for _, w := range ws {
		longest = max(longest, w.len)
	}
	if longest == 0 {
		return true, nil
	}
	// An anonymous mapping is page aligned, as O_DIRECT needs.
	buf, err := unix.Mmap(-1, 0, int(longest+sigBlock-longest%sigBlock), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return false, fmt.Errorf("check %s for signatures: buffer: %w", device, err)
	}
	defer unix.Munmap(buf)
	for _, w := range ws {
		// The last window may end off the 4 KiB grid; direct reads are whole blocks,
		// and the device ends there anyway.
		n := w.len + (sigBlock-w.len%sigBlock)%sigBlock
		got, err := f.ReadAt(buf[:n], w.off)
		if int64(got) < w.len {
			return false, fmt.Errorf("check %s for signatures: read %d bytes at %d: %w", device, w.len, w.off, err)
		}
		if !allZero(buf[:w.len]) {
			return false, nil
		}
	}
	return true, nil
}
