package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"syscall"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/storage"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"golang.org/x/sys/unix"
)

// etcd fails hard when its filesystem fills up: creating its write-ahead log panics, and a
// failed write to its database or log ends it. kubelab keeps it from getting there: Run
// does not start etcd without room for the log it allocates plus Config.MinFreeBytes,
// and while etcd runs a spaceGuard raises etcd's NOSPACE alarm when less than
// MinFreeBytes is free, so that etcd refuses writes (reads and deletes still work) with
// "etcdserver: mvcc: database space exceeded", which the API server answers as a 500
// Status. The guard disarms the alarm once space is back.

// defaultMinFree is the default Config.MinFreeBytes: room for the next write-ahead-log
// segment, which etcd allocates whole when it moves to a new segment, and as much again
// for its database.
const defaultMinFree = 128 << 20

// spaceCheckInterval is how often the guard looks at the free space.
const spaceCheckInterval = 500 * time.Millisecond

// freeBytes is the space unprivileged writers can still use on the filesystem of path,
// or of its nearest existing parent when path does not exist yet.
func freeBytes(path string) (uint64, error) {
	for p := path; ; p = filepath.Dir(p) {
		var st unix.Statfs_t
		err := unix.Statfs(p, &st)
		if err == nil {
			return st.Bavail * uint64(st.Bsize), nil
		}
		if !errors.Is(err, unix.ENOENT) || p == filepath.Dir(p) {
			return 0, fmt.Errorf("statfs %s: %w", p, err)
		}
	}
}

// walToAllocate is the write-ahead log etcd allocates when it starts in dir: a new
// member's first segment and the one prepared after it, or an existing member's next one.
func walToAllocate(dir string) uint64 {
	if wal.Exist(filepath.Join(dir, "member", "wal")) {
		return uint64(wal.SegmentSizeBytes)
	}
	return 2 * uint64(wal.SegmentSizeBytes)
}

// checkStartSpace fails, wrapping syscall.ENOSPC, when dir's filesystem has less free
// space than etcd allocates at start plus MinFreeBytes.
func (s *Server) checkStartSpace(dir string) error {
	if s.cfg.MinFreeBytes < 0 {
		return nil
	}
	free, err := freeBytes(dir)
	if err != nil {
		return fmt.Errorf("etcd: free space for %s: %w", dir, err)
	}
	log, keep := walToAllocate(dir), uint64(s.cfg.MinFreeBytes)
	if free < log+keep {
		return fmt.Errorf("etcd: not enough free space for etcd's data dir %s: %s free on its filesystem, "+
			"etcd needs %s (%s for its write-ahead log and %s kept free); free space there or use a data dir on a larger filesystem: %w",
			dir, mib(free), mib(log+keep), mib(log), mib(keep), syscall.ENOSPC)
	}
	return nil
}

// spaceIsLow tells whether dir's filesystem has less than MinFreeBytes free.
func (s *Server) spaceIsLow(dir string) bool {
	free, err := freeBytes(dir)
	return err == nil && s.cfg.MinFreeBytes > 0 && free < uint64(s.cfg.MinFreeBytes)
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// alarmServer is what the guard needs of etcd's server.
type alarmServer interface {
	Alarms() []*pb.AlarmMember
	Alarm(context.Context, *pb.AlarmRequest) (*pb.AlarmResponse, error)
	MemberID() types.ID
}

// spaceGuard raises etcd's NOSPACE alarm when less than minFree is free on etcd's
// filesystem, and disarms it once resumeFree is free again. It leaves the alarm raised
// while the database is over its quota: etcd raised it for that and would raise it again.
type spaceGuard struct {
	dir                 string
	minFree, resumeFree uint64
	quota               int64 // of etcd's database; <= 0: none
	srv                 alarmServer
	dbSize              func() int64
	free                func(string) (uint64, error)
	log                 *slog.Logger

	logged string // the last condition logged, so that each is logged once
}

func (s *Server) newSpaceGuard(dir string, srv alarmServer, dbSize func() int64, quota int64) *spaceGuard {
	if quota == 0 {
		quota = storage.DefaultQuotaBytes
	}
	g := &spaceGuard{dir: dir, quota: quota, srv: srv, dbSize: dbSize, free: freeBytes, log: s.cfg.Logger}
	if s.cfg.MinFreeBytes > 0 {
		g.minFree = uint64(s.cfg.MinFreeBytes)
		g.resumeFree = g.minFree + g.minFree/4
	}
	return g
}

// run checks the free space every spaceCheckInterval until ctx ends.
func (g *spaceGuard) run(ctx context.Context) {
	if g.minFree == 0 {
		return
	}
	t := time.NewTicker(spaceCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.check(ctx)
		}
	}
}

// check raises or disarms the NOSPACE alarm as the free space says.
func (g *spaceGuard) check(ctx context.Context) {
	if g.minFree == 0 {
		return
	}
	free, err := g.free(g.dir)
	if err != nil {
		g.once("statfs", slog.LevelError, "etcd: cannot read the free space of its filesystem", "dir", g.dir, "err", err)
		return
	}
	alarmed := false
	for _, a := range g.srv.Alarms() {
		if a.Alarm == pb.AlarmType_NOSPACE {
			alarmed = true
		}
	}
	switch {
	case free < g.minFree && !alarmed:
		if err := g.alarm(ctx, pb.AlarmRequest_ACTIVATE); err != nil {
			g.once("activate", slog.LevelError, "etcd: cannot raise the NOSPACE alarm", "dir", g.dir, "err", err)
			return
		}
		g.once("low", slog.LevelError, "etcd's filesystem is nearly full: etcd refuses writes until space is freed (requests answer "+
			"\"database space exceeded\")", "dir", g.dir, "free", mib(free), "writesResumeAt", mib(g.resumeFree))
	case free >= g.resumeFree && alarmed:
		if g.quota > 0 && g.dbSize() >= g.quota {
			g.once("quota", slog.LevelError, "etcd's database is over its quota: etcd refuses writes until it is compacted and defragmented",
				"dir", g.dir, "size", mib(uint64(g.dbSize())), "quota", mib(uint64(g.quota)))
			return
		}
		if err := g.alarm(ctx, pb.AlarmRequest_DEACTIVATE); err != nil {
			g.once("deactivate", slog.LevelError, "etcd: cannot disarm the NOSPACE alarm", "dir", g.dir, "err", err)
			return
		}
		g.once("ok", slog.LevelInfo, "etcd's filesystem has space again: etcd takes writes again", "dir", g.dir, "free", mib(free))
	}
}

func (g *spaceGuard) alarm(ctx context.Context, action pb.AlarmRequest_AlarmAction) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := g.srv.Alarm(ctx, &pb.AlarmRequest{Action: action, MemberID: uint64(g.srv.MemberID()), Alarm: pb.AlarmType_NOSPACE})
	return err
}

// once logs msg unless the previous message logged was for the same condition.
func (g *spaceGuard) once(cond string, level slog.Level, msg string, args ...any) {
	if g.logged == cond {
		return
	}
	g.logged = cond
	g.log.Log(context.Background(), level, msg, args...)
}
