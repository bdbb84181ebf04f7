package blockdev

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/kubelab/kubelab/internal/testutil"
)

func TestCopyFileSparse(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	var l Loop
	if err := l.CreateFile(src, 1<<30); err != nil {
		t.Fatal(err)
	}
	if err := l.CreateFile(src, 1<<30); err == nil {
		t.Fatal("CreateFile over an existing file succeeded")
	}
	data := bytes.Repeat([]byte{0xab}, 1<<20)
	f, _ := os.OpenFile(src, os.O_RDWR, 0)
	f.WriteAt(data, 0)
	f.WriteAt(data, 900<<20)
	f.Close()
	if err := l.CopyFile(dst, src, 2<<30); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(dst)
	if st.Size() != 2<<30 {
		t.Errorf("copy size %d, want 2 GiB", st.Size())
	}
	if alloc := st.Sys().(*syscall.Stat_t).Blocks * 512; alloc > 8<<20 {
		t.Errorf("copy allocates %d bytes; holes were not kept", alloc)
	}
	out, _ := os.Open(dst)
	defer out.Close()
	for _, off := range []int64{0, 900 << 20} {
		got := make([]byte, len(data))
		out.ReadAt(got, off)
		if !bytes.Equal(got, data) {
			t.Errorf("data at %d differs", off)
		}
	}
	got := make([]byte, 4096)
	out.ReadAt(got, 500<<20)
	if !bytes.Equal(got, make([]byte, 4096)) {
		t.Error("hole is not zero")
	}
	if err := l.CopyFile(filepath.Join(dir, "x"), filepath.Join(dir, "missing"), 0); err == nil {
		t.Error("copy of a missing file succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); !os.IsNotExist(err) {
		t.Error("failed copy left its destination")
	}
}

func TestLoopAttachGrowDetach(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "vol.img")
	var l Loop
	if err := l.CreateFile(file, 64<<20); err != nil {
		t.Fatal(err)
	}
	dev, err := l.Attach(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if l.BackingFile(dev) == file {
			l.Detach(dev)
		}
	})
	if got := l.BackingFile(dev); got != file {
		t.Fatalf("backing file %q, want %s", got, file)
	}
	if got := l.List(dir); got[dev] != file || len(got) != 1 {
		t.Errorf("List = %v", got)
	}
	if n, _ := l.Size(dev); n != 64<<20 {
		t.Errorf("size %d", n)
	}
	if err := l.GrowFile(file, 128<<20); err != nil {
		t.Fatal(err)
	}
	if err := l.Refresh(dev); err != nil {
		t.Fatal(err)
	}
	if n, _ := l.Size(dev); n != 128<<20 {
		t.Errorf("size after refresh %d, want 128 MiB", n)
	}
	if err := l.Detach(dev); err != nil {
		t.Fatal(err)
	}
	if got := l.BackingFile(dev); got == file {
		t.Error("device still backed after detach")
	}
	if err := l.Detach(dev); err != nil {
		t.Errorf("second detach: %v", err)
	}
}

func TestFake(t *testing.T) {
	f := NewFake()
	if err := f.CreateFile("/v/a", 10); err != nil {
		t.Fatal(err)
	}
	dev, err := f.Attach("/v/a")
	if err != nil || f.BackingFile(dev) != "/v/a" || len(f.List("/v")) != 1 {
		t.Fatalf("attach: %v %v", dev, err)
	}
	f.Fail("Attach", os.ErrPermission)
	if _, err := f.Attach("/v/a"); err == nil {
		t.Error("injected failure not returned")
	}
	f.Detach(dev)
	if len(f.Devices()) != 0 {
		t.Error("detach kept the device")
	}
}
