package admission_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

const forbiddenMessage = "configmaps may not be named forbidden"

// webhookServer is an HTTPS admission webhook on 127.0.0.1: /validate denies ConfigMaps
// named "forbidden", /mutate labels every object mutated=yes with a JSONPatch.
type webhookServer struct {
	*httptest.Server
	caBundle []byte
	calls    atomic.Int64
}

// startWebhookServer serves the webhooks with httptest's certificate (for 127.0.0.1),
// or with the self-signed certificate for dnsName when it is not empty.
func startWebhookServer(t *testing.T, dnsName string) *webhookServer {
	t.Helper()
	w := &webhookServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/validate", w.serve(func(req *admissionv1.AdmissionRequest, obj *metav1.PartialObjectMetadata) *admissionv1.AdmissionResponse {
		if obj.Name == "forbidden" {
			return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: forbiddenMessage}}
		}
		return &admissionv1.AdmissionResponse{Allowed: true}
	}))
	mux.HandleFunc("/mutate", w.serve(func(req *admissionv1.AdmissionRequest, obj *metav1.PartialObjectMetadata) *admissionv1.AdmissionResponse {
		op := map[string]interface{}{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}
		if obj.Labels == nil {
			op = map[string]interface{}{"op": "add", "path": "/metadata/labels", "value": map[string]string{"mutated": "yes"}}
		}
		patch, _ := json.Marshal([]interface{}{op})
		return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: ptr.To(admissionv1.PatchTypeJSONPatch)}
	}))
	w.Server = httptest.NewUnstartedServer(mux)
	if dnsName != "" {
		cert := selfSignedCert(t, dnsName)
		w.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	}
	w.StartTLS()
	t.Cleanup(w.Close)
	w.caBundle = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.Certificate().Raw})
	return w
}

// selfSignedCert is a serving certificate for dnsName that is its own CA.
func selfSignedCert(t *testing.T, dnsName string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// serve answers AdmissionReviews with decide's response.
func (w *webhookServer) serve(decide func(*admissionv1.AdmissionRequest, *metav1.PartialObjectMetadata) *admissionv1.AdmissionResponse) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		w.calls.Add(1)
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(rw, fmt.Sprintf("not an AdmissionReview: %v", err), http.StatusBadRequest)
			return
		}
		var obj metav1.PartialObjectMetadata
		if err := json.Unmarshal(review.Request.Object.Raw, &obj); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		resp := decide(review.Request, &obj)
		resp.UID = review.Request.UID
		review.Request, review.Response = nil, resp
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(&review)
	}
}

// configMapRules match creating ConfigMaps.
var configMapRules = []admissionregistrationv1.RuleWithOperations{{
	Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
	Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
}}

// validatingWebhook is a webhook on ConfigMaps created in namespace ns, called at url.
func validatingWebhook(name, url string, caBundle []byte, ns string, failure admissionregistrationv1.FailurePolicyType) *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "configmaps.kubelab.test",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
			Rules:                   configMapRules,
			FailurePolicy:           &failure,
			NamespaceSelector:       scopeSelector(ns),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
}

func TestWebhooks(t *testing.T) {
	network := &apiservertest.ClusterNetwork{}
	s := apiservertest.Start(t, apiservertest.Options{ClusterDial: network.Dial})
	hook := startWebhookServer(t, "")
	ctx := context.Background()
	validating := s.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	mutating := s.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()

	t.Run("Validating", func(t *testing.T) {
		ns := newNamespace(t, s)
		cfg, err := validating.Create(ctx, validatingWebhook(uniqueName("deny-forbidden"), hook.URL+"/validate", hook.caBundle, ns, admissionregistrationv1.Fail), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = validating.Delete(ctx, cfg.Name, metav1.DeleteOptions{}) })
		if got := *cfg.Webhooks[0].TimeoutSeconds; got != 10 {
			t.Errorf("timeoutSeconds defaulted to %d, want 10", got)
		}
		configMaps := s.Client.CoreV1().ConfigMaps(ns)
		testutil.Eventually(t, "webhook denies forbidden", func() error {
			if _, err := configMaps.Create(ctx, configMap("forbidden"), dryRun); err == nil {
				return errors.New("forbidden still allowed")
			}
			return nil
		})
		_, err = configMaps.Create(ctx, configMap("forbidden"), metav1.CreateOptions{})
		want := `admission webhook "configmaps.kubelab.test" denied the request: ` + forbiddenMessage
		if err == nil || err.Error() != want {
			t.Fatalf("create forbidden: got %v, want %q", err, want)
		}
		before := hook.calls.Load()
		if _, err := configMaps.Create(ctx, configMap("allowed"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create allowed: %v", err)
		}
		if hook.calls.Load() == before {
			t.Error("the webhook was not asked about the allowed ConfigMap")
		}
	})

	t.Run("Mutating", func(t *testing.T) {
		ns := newNamespace(t, s)
		url := hook.URL + "/mutate"
		cfg, err := mutating.Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: uniqueName("label")},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name:                    "label.kubelab.test",
				ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: hook.caBundle},
				Rules:                   configMapRules,
				NamespaceSelector:       scopeSelector(ns),
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1", "v1beta1"},
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = mutating.Delete(ctx, cfg.Name, metav1.DeleteOptions{}) })
		if got := ptr.Deref(cfg.Webhooks[0].ReinvocationPolicy, ""); got != admissionregistrationv1.NeverReinvocationPolicy {
			t.Errorf("reinvocationPolicy defaulted to %q, want Never", got)
		}
		configMaps := s.Client.CoreV1().ConfigMaps(ns)
		testutil.Eventually(t, "webhook labels ConfigMaps", func() error {
			cm, err := configMaps.Create(ctx, configMap(uniqueName("probe")), dryRun)
			if err != nil {
				return err
			}
			if cm.Labels["mutated"] != "yes" {
				return fmt.Errorf("labels %v", cm.Labels)
			}
			return nil
		})
		withLabels := configMap("labelled")
		withLabels.Labels = map[string]string{"app": "x"}
		if _, err := configMaps.Create(ctx, withLabels, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := configMaps.Get(ctx, "labelled", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Labels["mutated"] != "yes" || got.Labels["app"] != "x" {
			t.Errorf("stored labels %v, want app=x and mutated=yes", got.Labels)
		}
	})

	t.Run("FailurePolicy", func(t *testing.T) {
		ns := newNamespace(t, s)
		down := fmt.Sprintf("https://127.0.0.1:%d/validate", apiservertest.FreePort(t))
		cfg, err := validating.Create(ctx, validatingWebhook(uniqueName("down"), down, hook.caBundle, ns, admissionregistrationv1.Fail), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = validating.Delete(ctx, cfg.Name, metav1.DeleteOptions{}) })
		configMaps := s.Client.CoreV1().ConfigMaps(ns)
		testutil.Eventually(t, "Fail refuses while the webhook is down", func() error {
			_, err := configMaps.Create(ctx, configMap(uniqueName("probe")), dryRun)
			if err == nil {
				return errors.New("allowed")
			}
			if !strings.Contains(err.Error(), `failed calling webhook "configmaps.kubelab.test"`) {
				return fmt.Errorf("refused for another reason: %w", err)
			}
			return nil
		})
		cfg.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
		if _, err := validating.Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, "Ignore lets requests through while the webhook is down", func() error {
			_, err := configMaps.Create(ctx, configMap(uniqueName("probe")), dryRun)
			return err
		})
		if _, err := configMaps.Create(ctx, configMap("through"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create with the webhook down and failurePolicy Ignore: %v", err)
		}
	})

	// A service reference is called at the address the Service resolves to (here an
	// ExternalName Service naming localhost), verified as <service>.<namespace>.svc.
	t.Run("ServiceReference", func(t *testing.T) {
		ns := newNamespace(t, s)
		svcHook := startWebhookServer(t, "hook."+ns+".svc")
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hook"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"}}
		if _, err := s.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		port := int32(svcHook.Listener.Addr().(*net.TCPAddr).Port)
		cfg := validatingWebhook(uniqueName("service"), "", svcHook.caBundle, ns, admissionregistrationv1.Fail)
		cfg.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{CABundle: svcHook.caBundle,
			Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "hook", Path: ptr.To("/validate"), Port: &port}}
		cfg, err := validating.Create(ctx, cfg, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = validating.Delete(ctx, cfg.Name, metav1.DeleteOptions{}) })
		configMaps := s.Client.CoreV1().ConfigMaps(ns)
		testutil.Eventually(t, "webhook behind the Service denies forbidden", func() error {
			_, err := configMaps.Create(ctx, configMap("forbidden"), dryRun)
			if err == nil || !strings.Contains(err.Error(), forbiddenMessage) {
				return fmt.Errorf("got %v, want the webhook's denial", err)
			}
			return nil
		})
		if _, err := configMaps.Create(ctx, configMap("allowed"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create allowed: %v", err)
		}
	})

	// A webhook behind a ClusterIP Service is called at the ClusterIP through the cluster
	// network (Config.ClusterDial), which the API server's own namespace need not reach.
	t.Run("ClusterIPService", func(t *testing.T) {
		ns := newNamespace(t, s)
		svcHook := startWebhookServer(t, "hook."+ns+".svc")
		svc, err := s.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hook"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		clusterAddr := net.JoinHostPort(svc.Spec.ClusterIP, "443")
		network.Route(clusterAddr, svcHook.Listener.Addr().String())
		cfg := validatingWebhook(uniqueName("clusterip"), "", svcHook.caBundle, ns, admissionregistrationv1.Fail)
		cfg.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{CABundle: svcHook.caBundle,
			Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "hook", Path: ptr.To("/validate")}}
		if cfg, err = validating.Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = validating.Delete(ctx, cfg.Name, metav1.DeleteOptions{}) })
		testutil.Eventually(t, "webhook behind the ClusterIP denies forbidden", func() error {
			_, err := s.Client.CoreV1().ConfigMaps(ns).Create(ctx, configMap("forbidden"), dryRun)
			if err == nil || !strings.Contains(err.Error(), forbiddenMessage) {
				return fmt.Errorf("got %v, want the webhook's denial", err)
			}
			return nil
		})
		if !network.Dialed(clusterAddr) {
			t.Errorf("the webhook was not dialled at the Service's ClusterIP %s through the cluster network", clusterAddr)
		}
	})

	// The API refuses webhook configurations users get wrong, with field errors.
	t.Run("Validation", func(t *testing.T) {
		cfg := validatingWebhook(uniqueName("bad"), "http://127.0.0.1:1/x", nil, "ns", admissionregistrationv1.Fail)
		cfg.Webhooks[0].Name = "no-dots"
		cfg.Webhooks[0].SideEffects = nil
		cfg.Webhooks[0].AdmissionReviewVersions = nil
		_, err := validating.Create(ctx, cfg, metav1.CreateOptions{})
		assertFieldErrors(t, err, "webhooks[0].name", "webhooks[0].sideEffects", "webhooks[0].clientConfig.url",
			"webhooks[0].admissionReviewVersions")
	})
}
