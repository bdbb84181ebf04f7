package hostsfile

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestRender(t *testing.T) {
	base := "127.0.0.1\tlocalhost\n::1\tlocalhost\n"
	got := Render(base, "/a", map[string]string{"b.example": "127.1.0.2", "a.example": "127.1.0.1"})
	want := base + "# BEGIN kubelab load balancers (/a)\n127.1.0.1\ta.example\n127.1.0.2\tb.example\n# END kubelab load balancers (/a)\n"
	if got != want {
		t.Fatalf("Render:\n%s\nwant:\n%s", got, want)
	}
	// Another owner's block and the lines around it stay; ours is replaced.
	two := Render(got, "/b", map[string]string{"c.example": "127.2.0.1"})
	three := Render(two, "/a", map[string]string{"a.example": "127.1.0.9"})
	wantThree := base + "# BEGIN kubelab load balancers (/b)\n127.2.0.1\tc.example\n# END kubelab load balancers (/b)\n" +
		"# BEGIN kubelab load balancers (/a)\n127.1.0.9\ta.example\n# END kubelab load balancers (/a)\n"
	if three != wantThree {
		t.Fatalf("Render with two owners:\n%s\nwant:\n%s", three, wantThree)
	}
	if got := Render(Render(three, "/a", nil), "/b", nil); got != base {
		t.Fatalf("removing both blocks left:\n%s", got)
	}
}

func TestUpdate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	if err := Update(context.Background(), path, "/x", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("an empty update made the file: %v", err)
	}
	if err := os.WriteFile(path, []byte("127.0.0.1 localhost\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := Update(context.Background(), path, "/x", map[string]string{"lb.example": "127.9.0.1"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if want := "127.0.0.1 localhost\n# BEGIN kubelab load balancers (/x)\n127.9.0.1\tlb.example\n# END kubelab load balancers (/x)\n"; string(b) != want {
		t.Fatalf("hosts file:\n%s\nwant:\n%s", b, want)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640 kept", st.Mode().Perm())
	}
	if err := Update(context.Background(), path, "/x", nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "127.0.0.1 localhost\n" {
		t.Fatalf("after removing the block:\n%s", b)
	}
}
