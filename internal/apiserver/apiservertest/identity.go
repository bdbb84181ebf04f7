package apiservertest

import (
	"path/filepath"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubelab/kubelab/internal/apiserver"
)

// ConfigAs is a client config of the server for user in groups, with a client
// certificate of the cluster CA (PKI.ClientCert): the identity a component or a user
// other than the admin has.
func (s *Server) ConfigAs(t testing.TB, user string, groups ...string) *rest.Config {
	t.Helper()
	pki := apiserver.PKI{Dir: filepath.Join(s.DataDir, "pki")}
	cert, key, err := pki.ClientCert(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	return &rest.Config{Host: s.URL, QPS: 200, Burst: 400,
		TLSClientConfig: rest.TLSClientConfig{CAFile: pki.CACert(), CertFile: cert, KeyFile: key}}
}

// ClientAs is a clientset for user in groups (ConfigAs).
func (s *Server) ClientAs(t testing.TB, user string, groups ...string) kubernetes.Interface {
	t.Helper()
	return kubernetes.NewForConfigOrDie(s.ConfigAs(t, user, groups...))
}
