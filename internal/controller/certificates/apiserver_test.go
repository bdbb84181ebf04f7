package certificates

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// Against a real API server, as the certificate-controller service account: a request
// approved as `kubectl certificate approve` does is signed with the server's CA, and a
// bootstrapper's kubelet client request is approved after a SubjectAccessReview, then
// signed.
func TestWithAPIServer(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	pki := filepath.Join(s.DataDir, "pki")
	caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(caPEM)
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	// The controllers' identity, with the bootstrap policy's system:controller:certificate-controller.
	controller := s.ClientAs(t, "system:serviceaccount:kube-system:certificate-controller", "system:serviceaccounts", "system:serviceaccounts:kube-system")
	controllertest.RunController(t, controller, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return NewSigningController(SigningConfig{CACertFile: filepath.Join(pki, "ca.crt"), CAKeyFile: filepath.Join(pki, "ca.key"), Logger: quiet}, controller, f)
	})
	controllertest.RunController(t, controller, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return NewApprovingController(ApprovingConfig{Logger: quiet}, controller, f)
	})
	csrs := s.Client.CertificatesV1().CertificateSigningRequests()
	issued := func(name string) func() error {
		return func() error {
			csr, err := csrs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(csr.Status.Certificate) == 0 {
				return fmt.Errorf("%s not issued: %+v", name, csr.Status.Conditions)
			}
			return nil
		}
	}

	// A user's client certificate, approved by an admin.
	req := newCSR(t, "jane", certificatesv1.KubeAPIServerClientSignerName,
		&x509.CertificateRequest{Subject: pkix.Name{CommonName: "jane", Organization: []string{"devs"}}}, clientUsages...)
	req.ObjectMeta = metav1.ObjectMeta{Name: "jane"}
	req.Spec.ExpirationSeconds = ptr.To[int32](3600)
	created, err := csrs.Create(ctx, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.Conditions = append(created.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "KubectlApprove",
		Message: "This CSR was approved by kubectl certificate approve.", LastUpdateTime: metav1.Now()})
	if _, err := csrs.UpdateApproval(ctx, "jane", created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 30*time.Second, "jane's certificate", issued("jane"))
	got, _ := csrs.Get(ctx, "jane", metav1.GetOptions{})
	now := time.Now()
	cert := verifyIssued(t, got.Status.Certificate, ca, now, x509.ExtKeyUsageClientAuth)
	if cert.Subject.CommonName != "jane" || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "devs" ||
		cert.NotAfter.Sub(now) > time.Hour || cert.NotAfter.Sub(now) < 50*time.Minute {
		t.Errorf("certificate for %v until %v", cert.Subject, cert.NotAfter)
	}

	// A kubelet bootstrapping: its group may ask for node client certificates.
	if _, err := s.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test:nodeclient"},
		Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"create", "get"}, APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}},
			{Verbs: []string{"create"}, APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests/nodeclient"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test:nodeclient"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test:nodeclient"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:bootstrappers"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bootstrapper := s.ClientAs(t, "system:bootstrap:abcdef", "system:bootstrappers")
	node := newCSR(t, "node-n1", certificatesv1.KubeAPIServerClientKubeletSignerName, &x509.CertificateRequest{Subject: nodeSubject("n1")}, clientUsages...)
	node.ObjectMeta = metav1.ObjectMeta{Name: "node-n1"}
	testutil.EventuallyWithin(t, 30*time.Second, "the bootstrapper's request created", func() error {
		_, err := bootstrapper.CertificatesV1().CertificateSigningRequests().Create(ctx, node, metav1.CreateOptions{})
		return err
	})
	testutil.EventuallyWithin(t, 30*time.Second, "the node's certificate", issued("node-n1"))
	got, _ = csrs.Get(ctx, "node-n1", metav1.GetOptions{})
	if got.Spec.Username != "system:bootstrap:abcdef" || len(got.Status.Conditions) != 1 ||
		got.Status.Conditions[0].Reason != AutoApproved || got.Status.Conditions[0].Message != "Auto approving kubelet client certificate after SubjectAccessReview." {
		t.Errorf("node request %+v %+v", got.Spec.Username, got.Status.Conditions)
	}
	cert = verifyIssued(t, got.Status.Certificate, ca, time.Now(), x509.ExtKeyUsageClientAuth)
	if cert.Subject.CommonName != "system:node:n1" {
		t.Errorf("node certificate for %v", cert.Subject)
	}
}
