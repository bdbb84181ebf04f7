package apiserver_test

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
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestClusterNetwork: what the API server reaches on the cluster's network (Services'
// ClusterIPs, pods' IPs) it reaches through Config.ClusterDial, here a stand-in that
// routes those addresses to servers on loopback.
func TestClusterNetwork(t *testing.T) {
	network := &apiservertest.ClusterNetwork{}
	s := apiservertest.Start(t, apiservertest.Options{ClusterDial: network.Dial})
	t.Run("conversion webhook", func(t *testing.T) { testConversionWebhook(t, s, network) })
}

// testConversionWebhook: a CRD whose conversion webhook is named by a ClusterIP Service
// has its objects converted by the webhook, called at the Service's ClusterIP.
func testConversionWebhook(t *testing.T, s *apiservertest.Server, network *apiservertest.ClusterNetwork) {
	ctx := context.Background()
	ns := "default"
	svcName := "conv-" + fmt.Sprint(time.Now().UnixNano()%1_000_000)
	cert, caPEM := selfSignedServing(t, svcName+"."+ns+".svc")
	hook := httptest.NewUnstartedServer(http.HandlerFunc(convertWidgets))
	hook.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	hook.StartTLS()
	t.Cleanup(hook.Close)
	svc, err := s.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svcName},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Client.CoreV1().Services(ns).Delete(ctx, svcName, metav1.DeleteOptions{}) })
	clusterAddr := net.JoinHostPort(svc.Spec.ClusterIP, "443")
	network.Route(clusterAddr, hook.Listener.Addr().String())

	crds := apiextensionsclient.NewForConfigOrDie(s.Config).ApiextensionsV1().CustomResourceDefinitions()
	schemaProps := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object", XPreserveUnknownFields: ptr.To(true)}}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.conversion.kubelab.test"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "conversion.kubelab.test", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schemaProps},
				{Name: "v2", Served: true, Schema: schemaProps},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
					ClientConfig: &apiextensionsv1.WebhookClientConfig{CABundle: caPEM,
						Service: &apiextensionsv1.ServiceReference{Namespace: ns, Name: svcName, Path: ptr.To("/convert"), Port: ptr.To[int32](443)}}}},
		},
	}
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crds.Delete(ctx, crd.Name, metav1.DeleteOptions{}) })
	dyn := dynamic.NewForConfigOrDie(s.Config)
	v1 := dyn.Resource(schema.GroupVersionResource{Group: "conversion.kubelab.test", Version: "v1", Resource: "widgets"}).Namespace(ns)
	v2 := dyn.Resource(schema.GroupVersionResource{Group: "conversion.kubelab.test", Version: "v2", Resource: "widgets"}).Namespace(ns)
	w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "conversion.kubelab.test/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w"}, "spec": map[string]any{"size": "large"}}}
	testutil.Eventually(t, "a v1 Widget to be created", func() error {
		_, err := v1.Create(ctx, w, metav1.CreateOptions{})
		return err
	})
	got, err := v2.Get(ctx, "w", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the Widget as v2 (through the conversion webhook): %v", err)
	}
	if conv, _, _ := unstructured.NestedString(got.Object, "spec", "convertedBy"); conv != "webhook" || got.GetAPIVersion() != "conversion.kubelab.test/v2" {
		t.Errorf("the Widget as v2: %v; want it converted by the webhook", got.Object)
	}
	if !network.Dialed(clusterAddr) {
		t.Errorf("the conversion webhook was not dialled at the Service's ClusterIP %s through the cluster network", clusterAddr)
	}
}

// convertWidgets is a conversion webhook: every object gets the desired apiVersion and
// spec.convertedBy=webhook.
func convertWidgets(w http.ResponseWriter, r *http.Request) {
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not a ConversionReview: %v", err), http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, raw := range review.Request.Objects {
		var obj map[string]any
		if err := json.Unmarshal(raw.Raw, &obj); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		obj["apiVersion"] = review.Request.DesiredAPIVersion
		if spec, ok := obj["spec"].(map[string]any); ok {
			spec["convertedBy"] = "webhook"
		}
		b, _ := json.Marshal(obj)
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: b})
	}
	review.Request, review.Response = nil, resp
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

// selfSignedServing is a serving certificate for dnsName that is its own CA, and that CA
// in PEM.
func selfSignedServing(t *testing.T, dnsName string) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
