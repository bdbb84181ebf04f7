package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/types"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/kubelab/kubelab/internal/testutil"
)

// fakeAlarms is an etcd server's alarm list.
type fakeAlarms struct {
	nospace bool
	calls   []pb.AlarmRequest_AlarmAction
}

func (f *fakeAlarms) Alarms() []*pb.AlarmMember {
	if f.nospace {
		return []*pb.AlarmMember{{MemberID: 7, Alarm: pb.AlarmType_NOSPACE}}
	}
	return nil
}

func (f *fakeAlarms) Alarm(_ context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	if r.MemberID != 7 || r.Alarm != pb.AlarmType_NOSPACE {
		return nil, fmt.Errorf("unexpected alarm request %v", r)
	}
	f.calls = append(f.calls, r.Action)
	f.nospace = r.Action == pb.AlarmRequest_ACTIVATE
	return &pb.AlarmResponse{}, nil
}

func (f *fakeAlarms) MemberID() types.ID { return 7 }

func TestSpaceGuard(t *testing.T) {
	const mb = 1 << 20
	srv := &fakeAlarms{}
	var free uint64
	dbSize := int64(1 * mb)
	rec := &recorder{}
	s := &Server{cfg: Config{MinFreeBytes: 100 * mb, Logger: slog.New(rec)}}
	g := s.newSpaceGuard("/data/etcd", srv, func() int64 { return dbSize }, 50*mb)
	g.free = func(string) (uint64, error) { return free, nil }
	for _, step := range []struct {
		name        string
		free        uint64
		dbSize      int64
		wantAlarmed bool
		wantCalls   int
	}{
		{"plenty of space", 500 * mb, 1 * mb, false, 0},
		{"below the minimum", 99 * mb, 1 * mb, true, 1},
		{"still below", 10 * mb, 1 * mb, true, 1},
		{"above the minimum but not by a quarter", 120 * mb, 1 * mb, true, 1},
		{"space is back", 125 * mb, 1 * mb, false, 2},
		{"below again", 50 * mb, 1 * mb, true, 3},
		{"space is back but the database is over its quota", 500 * mb, 50 * mb, true, 3},
		{"the database was defragmented", 500 * mb, 10 * mb, false, 4},
	} {
		free, dbSize = step.free, step.dbSize
		g.check(context.Background())
		if srv.nospace != step.wantAlarmed || len(srv.calls) != step.wantCalls {
			t.Fatalf("%s: alarmed %v after %d alarm requests, want %v after %d", step.name, srv.nospace, len(srv.calls), step.wantAlarmed, step.wantCalls)
		}
	}
	var msgs []string
	for _, r := range rec.records {
		msgs = append(msgs, r.Level.String()+" "+r.Message)
	}
	want := []string{"ERROR etcd's filesystem is nearly full", "INFO etcd's filesystem has space again",
		"ERROR etcd's filesystem is nearly full", "ERROR etcd's database is over its quota", "INFO etcd's filesystem has space again"}
	if len(msgs) != len(want) {
		t.Fatalf("logged %q, want one line per change: %q", msgs, want)
	}
	for i := range want {
		if !strings.HasPrefix(msgs[i], want[i]) {
			t.Errorf("log line %d is %q, want %q…", i, msgs[i], want[i])
		}
	}
}

// smallFS mounts a tmpfs of size bytes on a temporary dir until the test ends. A
// filesystem that etcd still holds files on (after a failure the test provokes) is
// detached lazily and goes when the test process ends.
func smallFS(t *testing.T, size int64) string {
	t.Helper()
	testutil.RequireRoot(t)
	dir := t.TempDir()
	if err := unix.Mount("kubelab-etcd-test", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		}
	})
	return dir
}

// fill allocates a file in dir that leaves about leave bytes free, and returns its path.
func fill(t *testing.T, dir string, leave uint64) string {
	t.Helper()
	free, err := freeBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if free > leave {
		if err := unix.Fallocate(int(f.Fd()), 0, 0, int64(free-leave)); err != nil {
			t.Fatalf("fill %s: %v", dir, err)
		}
	}
	return path
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// runEtcd starts Run with cfg (ports and logger filled in) and returns Run's error channel
// and the function that ends it. Run's end is awaited in t.Cleanup unless the test takes
// its error.
func runEtcd(t *testing.T, cfg Config) (*Server, chan error, context.CancelFunc) {
	t.Helper()
	cfg.ClientURL = fmt.Sprintf("https://127.0.0.1:%d", freePort(t))
	cfg.PeerURL = fmt.Sprintf("https://127.0.0.1:%d", freePort(t))
	if cfg.ClientTLS.CertFile == "" {
		pki := testPKI(t)
		cfg.ClientTLS = TLSFiles{CertFile: pki.EtcdServerCert(), KeyFile: pki.EtcdServerKey(), TrustedCAFile: pki.EtcdCACert()}
		cfg.PeerTLS = TLSFiles{CertFile: pki.EtcdPeerCert(), KeyFile: pki.EtcdPeerKey(), TrustedCAFile: pki.EtcdCACert()}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()
	t.Cleanup(cancel)
	return s, errc, cancel
}

// testWriter writes to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func runError(t *testing.T, errc <-chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(within):
		t.Fatalf("Run did not return within %s", within)
		return nil
	}
}

// newClient is a client of s with the API server's etcd client certificate.
func newClient(t *testing.T, s *Server) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints(), TLS: clientTLS(t, s, "apiserver"),
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func put(c *clientv3.Client, key, val string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := c.Put(ctx, key, val)
	return err
}

// TestStartWithoutSpace: on a filesystem too small for etcd, Run fails at once with an
// error naming the data dir and the lack of space (etcd itself would panic creating its
// write-ahead log).
func TestStartWithoutSpace(t *testing.T) {
	dir := filepath.Join(smallFS(t, 32<<20), "etcd")
	_, errc, _ := runEtcd(t, Config{DataDir: dir})
	err := runError(t, errc, 10*time.Second)
	t.Logf("Run: %v", err)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "not enough free space") {
		t.Fatalf("Run returned %v, want an error naming %s and the lack of space", err, dir)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("etcd was started anyway: %s exists (%v)", dir, err)
	}
}

// TestStartFailureIsAnError: what etcd cannot go on from while it starts (here: creating
// its write-ahead log on a full filesystem, with the free-space check off) is the error
// Run returns, not a panic of the process.
func TestStartFailureIsAnError(t *testing.T) {
	dir := filepath.Join(smallFS(t, 32<<20), "etcd")
	_, errc, _ := runEtcd(t, Config{DataDir: dir, MinFreeBytes: -1})
	err := runError(t, errc, 10*time.Second)
	t.Logf("Run: %v", err)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "failed to create WAL") {
		t.Fatalf("Run returned %v, want etcd's failure naming %s and the lack of space", err, dir)
	}
}

// TestNoSpaceWhileRunning: when the filesystem fills up under a running etcd, etcd
// refuses writes with "database space exceeded" and keeps serving reads; once space is
// back it takes writes again. Run never stops.
func TestNoSpaceWhileRunning(t *testing.T) {
	const mb = 1 << 20
	fs := smallFS(t, 200*mb)
	rec := &recorder{}
	s, errc, cancel := runEtcd(t, Config{DataDir: filepath.Join(fs, "etcd"), MinFreeBytes: 32 * mb, Logger: slog.New(rec)})
	waitReady(t, s, errc)
	c := newClient(t, s)
	if err := put(c, "/before", "v"); err != nil {
		t.Fatalf("put with space: %v", err)
	}

	filler := fill(t, fs, 16*mb)
	var err error
	testutil.EventuallyWithin(t, 10*time.Second, "etcd to refuse writes on its full filesystem", func() bool {
		err = put(c, "/during", "v")
		return err != nil
	})
	if !strings.Contains(err.Error(), "database space exceeded") {
		t.Fatalf("put on a full filesystem: %v, want etcd's \"database space exceeded\"", err)
	}
	ctx, cancelGet := context.WithTimeout(context.Background(), 2*time.Second)
	got, gerr := c.Get(ctx, "/before")
	cancelGet()
	if gerr != nil || len(got.Kvs) != 1 {
		t.Fatalf("get on a full filesystem: %v %v, want the value", got, gerr)
	}
	select {
	case err := <-errc:
		t.Fatalf("Run returned while the filesystem was full: %v", err)
	default:
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 10*time.Second, "etcd to take writes once space came back", func() error {
		return put(c, "/after", "v")
	})

	var logged []string
	for _, r := range rec.records {
		if r.Level >= slog.LevelInfo {
			logged = append(logged, r.Message)
			t.Logf("logged: %s %s", r.Level, r.Message)
		}
	}
	if !strings.Contains(strings.Join(logged, "\n"), "etcd's filesystem is nearly full") {
		t.Errorf("no error logged for the full filesystem; logged: %q", logged)
	}
	cancel()
	if err := runError(t, errc, 30*time.Second); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestDiskFullWithoutGuard: with the guard off, a write failing for lack of space stops
// etcd; Run returns that as an error naming the data dir instead of etcd ending the
// process.
func TestDiskFullWithoutGuard(t *testing.T) {
	const mb = 1 << 20
	fs := smallFS(t, 200*mb)
	dir := filepath.Join(fs, "etcd")
	s, errc, _ := runEtcd(t, Config{DataDir: dir, MinFreeBytes: -1})
	waitReady(t, s, errc)
	c := newClient(t, s)
	fill(t, fs, 0)
	val := strings.Repeat("x", 64<<10)
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		put(c, fmt.Sprintf("/k/%d", i), val)
		select {
		case err := <-errc:
			t.Logf("Run: %v", err)
			if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("Run returned %v, want an error naming %s and the lack of space", err, dir)
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("etcd neither failed nor stopped 20s after its filesystem filled up")
		}
	}
}

// TestNoSpaceAlarmClearedAtRestart: etcd keeps its NOSPACE alarm across a restart; when
// space came back while it was stopped, the alarm is gone before Run says it is ready.
func TestNoSpaceAlarmClearedAtRestart(t *testing.T) {
	const mb = 1 << 20
	fs := smallFS(t, 200*mb)
	cfg := Config{DataDir: filepath.Join(fs, "etcd"), MinFreeBytes: 32 * mb}
	s, errc, cancel := runEtcd(t, cfg)
	waitReady(t, s, errc)
	c := newClient(t, s)
	filler := fill(t, fs, 16*mb)
	testutil.EventuallyWithin(t, 10*time.Second, "etcd to refuse writes on its full filesystem", func() bool {
		return put(c, "/during", "v") != nil
	})
	c.Close()
	cancel()
	if err := runError(t, errc, 30*time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s, errc, _ = runEtcd(t, cfg)
	waitReady(t, s, errc)
	if err := put(newClient(t, s), "/after", "v"); err != nil {
		t.Fatalf("first write after a restart with space back: %v", err)
	}
}
