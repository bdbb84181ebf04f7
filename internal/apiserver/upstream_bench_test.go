package apiserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubelab/kubelab/internal/apiserver"
	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

// kubeAPIServerEnv names the upstream kube-apiserver binary the comparisons run;
// hack/upstream.sh builds one, and hack/test.sh builds it once into
// $(go env GOPATH)/upstream/kube-apiserver and sets this variable for the suite.
const kubeAPIServerEnv = "KUBELAB_KUBE_APISERVER"

// kubeAPIServerBinary is the upstream kube-apiserver the comparisons run: the one
// kubeAPIServerEnv names, else the one hack/test.sh keeps under GOPATH, else "".
func kubeAPIServerBinary() string {
	if bin := os.Getenv(kubeAPIServerEnv); bin != "" {
		return bin
	}
	gopath, err := exec.Command("go", "env", "GOPATH").Output()
	if err != nil {
		return ""
	}
	bin := filepath.Join(strings.TrimSpace(string(gopath)), "upstream", "kube-apiserver", "kube-apiserver")
	if _, err := os.Stat(bin); err != nil {
		return ""
	}
	return bin
}

// BenchmarkAgainstKubeAPIServer runs the create benchmark against kubelab's API server
// and, in the same run, on the same etcd, with the same client and certificates, against
// the upstream kube-apiserver (its default admission plugins and priority and fairness,
// authorization Node,RBAC as kubelab's), next to raw etcd puts of the bytes
// kube-apiserver stored for the pod. CPU per operation counts this process (client,
// kubelab's server, etcd) and the kube-apiserver process. Then the watch goal's load
// on each. It answers whether the goals are within reach of upstream's own server on
// this machine.
func BenchmarkAgainstKubeAPIServer(b *testing.B) {
	bin := kubeAPIServerBinary()
	if bin == "" {
		b.Skipf("set %s to a kube-apiserver binary (hack/upstream.sh builds one) to compare with it", kubeAPIServerEnv)
	}
	quietLogs(b)
	s := apiservertest.Start(b, apiservertest.Options{})
	kas := startKubeAPIServer(b, bin, s)
	ctx := context.Background()
	type server struct {
		name   string
		config rest.Config
		client kubernetes.Interface
		prefix string
	}
	newServer := func(name string, c *rest.Config, prefix string) server {
		pc := benchClientConfig(*c)
		return server{name, pc, kubernetes.NewForConfigOrDie(&pc), prefix}
	}
	servers := []server{newServer("kubelab", s.Config, "/registry"), newServer("kube-apiserver", kas.config, kas.prefix)}
	for _, srv := range servers {
		for _, ns := range []string{"bench-create", "bench-watch"} {
			if _, err := srv.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				b.Fatalf("%s: %v", srv.name, err)
			}
			// No controller-manager runs: the ServiceAccount admission plugins want the
			// namespace's default account to exist (apiservertest may have made kubelab's).
			if _, err := srv.client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				b.Fatalf("%s: %v", srv.name, err)
			}
		}
	}
	// The writer is no admin: RBAC decides its creates, through a RoleBinding.
	writerCert, writerKey, err := (apiserver.PKI{Dir: filepath.Join(s.DataDir, "pki")}).ClientCert("bench-writer")
	if err != nil {
		b.Fatal(err)
	}
	writers := map[string]kubernetes.Interface{}
	for _, srv := range servers {
		if err := bindPodWriter(ctx, srv.client, "bench-create", "bench-writer"); err != nil {
			b.Fatalf("%s: %v", srv.name, err)
		}
		wc := srv.config
		wc.TLSClientConfig.CertFile, wc.TLSClientConfig.KeyFile = writerCert, writerKey
		wc.TLSClientConfig.CertData, wc.TLSClientConfig.KeyData = nil, nil
		writers[srv.name] = kubernetes.NewForConfigOrDie(&wc)
	}
	etcd := benchEtcdClient(b, s)

	var stored string
	for _, srv := range servers {
		if _, err := srv.client.CoreV1().Pods("bench-create").Create(ctx, benchPod("sample"), metav1.CreateOptions{}); err != nil {
			b.Fatalf("%s: %v", srv.name, err)
		}
		got, err := etcd.Get(ctx, srv.prefix+"/pods/bench-create/sample")
		if err != nil || len(got.Kvs) != 1 {
			b.Fatalf("%s's pod is not at %s/pods/bench-create/sample in etcd: %v", srv.name, srv.prefix, err)
		}
		b.Logf("%s stores the pod in %d bytes", srv.name, len(got.Kvs[0].Value))
		stored = string(got.Kvs[0].Value)
	}

	cpu := func() time.Duration { return processCPU(b) + childCPU(b, kas.cmd.Process.Pid) }
	rates := map[string]float64{}
	for _, srv := range servers {
		b.Run(srv.name+"-create", func(b *testing.B) {
			run := nextRun()
			inParallelCPU(b, cpu, func(i int) error {
				_, err := srv.client.CoreV1().Pods("bench-create").Create(ctx, benchPod(fmt.Sprintf("c%d-%07d", run, i)), metav1.CreateOptions{})
				return err
			})
			rates[srv.name] = perSecond(b)
			b.ReportMetric(rates[srv.name], "creates/s")
		})
		b.Run(srv.name+"-create-rbac", func(b *testing.B) {
			run := nextRun()
			inParallelCPU(b, cpu, func(i int) error {
				_, err := writers[srv.name].CoreV1().Pods("bench-create").Create(ctx, benchPod(fmt.Sprintf("w%d-%07d", run, i)), metav1.CreateOptions{})
				return err
			})
			b.ReportMetric(perSecond(b), "creates/s")
		})
	}
	b.Run("etcd-put", func(b *testing.B) {
		run := nextRun()
		inParallelCPU(b, cpu, func(i int) error {
			_, err := etcd.Put(ctx, fmt.Sprintf("%spods/bench-create/u%d-%07d", benchRawPrefix, run, i), stored)
			return err
		})
		rates["etcd"] = perSecond(b)
		b.ReportMetric(rates["etcd"], "puts/s")
	})
	// The watch goal's load on each: 100 watchers on connections of their own, decoding
	// every event, and reading only the frames.
	for _, srv := range servers {
		for _, mode := range []struct {
			name string
			mode watchMode
		}{{"", decodeEvents}, {"-frames", readFrames}} {
			b.Run(fmt.Sprintf("%s-watch-100%s/%d-per-s", srv.name, mode.name, benchWatchRate), func(b *testing.B) {
				benchWatch(b, srv.client, ownConnections(srv.config), cpu, benchWatchRate, mode.mode)
			})
		}
	}
	if rates["etcd"] > 0 {
		for _, srv := range servers {
			b.Logf("%s creates/s ÷ etcd puts/s at %d in flight: %.2f", srv.name, benchConcurrency, rates[srv.name]/rates["etcd"])
		}
	}
}

// kubeAPIServer is an upstream kube-apiserver started by a test or benchmark.
type kubeAPIServer struct {
	cmd    *exec.Cmd
	config *rest.Config
	prefix string
}

// startKubeAPIServer starts bin on s's etcd under its own prefix, serving with s's
// certificate and trusting s's CA, so s's admin credentials work against it; it is
// ended (by its PID) when the test or benchmark ends.
func startKubeAPIServer(tb testing.TB, bin string, s *apiservertest.Server) *kubeAPIServer {
	tb.Helper()
	dir := tb.TempDir()
	saKey := filepath.Join(dir, "sa.key")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(saKey, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
	pki := filepath.Join(s.DataDir, "pki")
	port := apiservertest.FreePort(tb)
	prefix := "/kube-apiserver-bench"
	cmd := exec.Command(bin,
		"--etcd-servers="+fmt.Sprintf("https://127.0.0.1:%d", s.EtcdClientPort),
		"--etcd-cafile="+filepath.Join(pki, "etcd", "ca.crt"),
		"--etcd-certfile="+filepath.Join(pki, "apiserver-etcd-client.crt"), "--etcd-keyfile="+filepath.Join(pki, "apiserver-etcd-client.key"),
		"--etcd-prefix="+prefix,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--endpoint-reconciler-type=none",
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--tls-cert-file="+filepath.Join(pki, "apiserver.crt"), "--tls-private-key-file="+filepath.Join(pki, "apiserver.key"),
		"--client-ca-file="+filepath.Join(pki, "ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+saKey, "--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.96.0.0/12",
		// As kubelab serves: the Node authorizer and RBAC, and kube-apiserver's default
		// admission plugins.
		"--authorization-mode=Node,RBAC",
	)
	logPath := filepath.Join(dir, "kube-apiserver.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		tb.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); logFile.Close() }()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	cfg := rest.CopyConfig(s.Config)
	cfg.Host = fmt.Sprintf("https://127.0.0.1:%d", port)
	client := kubernetes.NewForConfigOrDie(cfg)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		if err == nil && strings.TrimSpace(string(body)) == "ok" {
			break
		}
		select {
		case err := <-exited:
			out, _ := os.ReadFile(logPath)
			tb.Fatalf("kube-apiserver exited (%v):\n%s", err, tail(out, 4000))
		default:
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(logPath)
			tb.Fatalf("kube-apiserver not ready within 2m (last: %v):\n%s", err, tail(out, 4000))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return &kubeAPIServer{cmd: cmd, config: cfg, prefix: prefix}
}

// childCPU is the CPU time (user and system) process pid has used so far, from
// /proc/<pid>/stat (fields 14 and 15, in clock ticks of 10 ms).
func childCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name (field 2) may hold spaces; the fields after it are plain.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(fields) < 13 {
		b.Fatalf("/proc/%d/stat has %d fields after the name", pid, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] { // utime, stime: fields 14 and 15 of the line
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			b.Fatalf("/proc/%d/stat: %v", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// bindPodWriter lets user create pods in namespace through a Role and RoleBinding, and
// waits until the server's authorizer sees it.
func bindPodWriter(ctx context.Context, client kubernetes.Interface, namespace, user string) error {
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-writer"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"create"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}
	if _, err := client.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return err
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pod-writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-writer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if _, err := client.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		sar, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: []string{"system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "create", Resource: "pods"}}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed, nil
	})
}
