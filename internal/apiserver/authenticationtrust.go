package apiserver

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	genericfeatures "k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
)

// The ConfigMap kube-system/extension-apiserver-authentication says whom servers that
// delegate authentication to this one (aggregated API servers, and any server built on
// k8s.io/apiserver's delegating authentication) must trust, under kube-apiserver's keys:
//
//	client-ca-file                      the CAs of the client certificates this server accepts (PEM)
//	requestheader-client-ca-file        the CA of the front proxy's client certificate (PEM)
//	requestheader-allowed-names         the front proxy certificate's common names
//	requestheader-username-headers      the headers naming the user
//	requestheader-uid-headers           the headers giving the user's UID
//	requestheader-group-headers         the headers naming the groups
//	requestheader-extra-headers-prefix  the prefixes of the headers of the user's extra
//
// the last five each a JSON array of strings. The API server writes it at start and checks
// it every minute. As kube-apiserver, it adds what it needs to what is there rather than
// replacing it: CAs and names another writer put there stay, but certificates expired
// for more than five minutes go.

const (
	authenticationTrustNamespace = metav1.NamespaceSystem
	authenticationTrustName      = "extension-apiserver-authentication"
	authenticationTrustResync    = time.Minute
)

// The request headers the API server sets when it passes a request on as a front
// proxy (aggregator.go).
var (
	requestHeaderUsername    = []string{"X-Remote-User"}
	requestHeaderUID         = []string{"X-Remote-Uid"}
	requestHeaderGroup       = []string{"X-Remote-Group"}
	requestHeaderExtraPrefix = []string{"X-Remote-Extra-"}
)

// authenticationTrust is what the ConfigMap says.
type authenticationTrust struct {
	clientCA, requestHeaderCA []*x509.Certificate
	allowedNames              []string
	usernameHeaders           []string
	uidHeaders                []string
	groupHeaders              []string
	extraHeaderPrefixes       []string
}

// requiredAuthenticationTrust is what this server needs the ConfigMap to say: clientCA
// and requestHeaderCA are PEM bundles.
func requiredAuthenticationTrust(clientCA, requestHeaderCA []byte) (authenticationTrust, error) {
	client, err := certutil.ParseCertsPEM(clientCA)
	if err != nil {
		return authenticationTrust{}, fmt.Errorf("client CA: %w", err)
	}
	front, err := certutil.ParseCertsPEM(requestHeaderCA)
	if err != nil {
		return authenticationTrust{}, fmt.Errorf("front-proxy CA: %w", err)
	}
	t := authenticationTrust{clientCA: client, requestHeaderCA: front, allowedNames: []string{FrontProxyClientName},
		usernameHeaders: requestHeaderUsername, groupHeaders: requestHeaderGroup, extraHeaderPrefixes: requestHeaderExtraPrefix}
	if utilfeature.DefaultFeatureGate.Enabled(genericfeatures.RemoteRequestHeaderUID) {
		t.uidHeaders = requestHeaderUID
	}
	return t, nil
}

// parseAuthenticationTrust reads the ConfigMap's data.
func parseAuthenticationTrust(data map[string]string) (authenticationTrust, error) {
	var t authenticationTrust
	for key, into := range map[string]*[]string{
		"requestheader-allowed-names":        &t.allowedNames,
		"requestheader-username-headers":     &t.usernameHeaders,
		"requestheader-uid-headers":          &t.uidHeaders,
		"requestheader-group-headers":        &t.groupHeaders,
		"requestheader-extra-headers-prefix": &t.extraHeaderPrefixes,
	} {
		if data[key] == "" {
			continue
		}
		if err := json.Unmarshal([]byte(data[key]), into); err != nil {
			return authenticationTrust{}, fmt.Errorf("%s: %w", key, err)
		}
	}
	for key, into := range map[string]*[]*x509.Certificate{
		"client-ca-file":               &t.clientCA,
		"requestheader-client-ca-file": &t.requestHeaderCA,
	} {
		if data[key] == "" {
			continue
		}
		certs, err := certutil.ParseCertsPEM([]byte(data[key]))
		if err != nil {
			return authenticationTrust{}, fmt.Errorf("%s: %w", key, err)
		}
		*into = certs
	}
	return t, nil
}

// data is the ConfigMap's data saying t. Without a front-proxy CA it says nothing of
// request headers: a server that read them would trust headers no one can vouch for.
func (t authenticationTrust) data() map[string]string {
	data := map[string]string{}
	if len(t.clientCA) > 0 {
		data["client-ca-file"] = encodeCerts(t.clientCA)
	}
	if len(t.requestHeaderCA) == 0 {
		return data
	}
	data["requestheader-client-ca-file"] = encodeCerts(t.requestHeaderCA)
	for key, list := range map[string][]string{
		"requestheader-allowed-names":        t.allowedNames,
		"requestheader-username-headers":     t.usernameHeaders,
		"requestheader-group-headers":        t.groupHeaders,
		"requestheader-extra-headers-prefix": t.extraHeaderPrefixes,
	} {
		data[key] = jsonStrings(list)
	}
	if len(t.uidHeaders) > 0 {
		data["requestheader-uid-headers"] = jsonStrings(t.uidHeaders)
	}
	return data
}

// mergeAuthenticationTrust is what the ConfigMap must say when it says existing and
// this server needs required: each list with required's entries added after existing's,
// each certificate once, and none that expired more than five minutes before now.
func mergeAuthenticationTrust(existing, required authenticationTrust, now time.Time) authenticationTrust {
	union := func(a, b []string) []string {
		out := slices.Clone(a)
		for _, s := range b {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		return out
	}
	certs := func(a, b []*x509.Certificate) []*x509.Certificate {
		var out []*x509.Certificate
		for _, c := range append(slices.Clone(a), b...) {
			if c.NotAfter.Before(now.Add(-5*time.Minute)) ||
				slices.ContainsFunc(out, func(o *x509.Certificate) bool { return bytes.Equal(o.Raw, c.Raw) }) {
				continue
			}
			out = append(out, c)
		}
		return out
	}
	return authenticationTrust{
		clientCA:            certs(existing.clientCA, required.clientCA),
		requestHeaderCA:     certs(existing.requestHeaderCA, required.requestHeaderCA),
		allowedNames:        union(existing.allowedNames, required.allowedNames),
		usernameHeaders:     union(existing.usernameHeaders, required.usernameHeaders),
		uidHeaders:          union(existing.uidHeaders, required.uidHeaders),
		groupHeaders:        union(existing.groupHeaders, required.groupHeaders),
		extraHeaderPrefixes: union(existing.extraHeaderPrefixes, required.extraHeaderPrefixes),
	}
}

func encodeCerts(certs []*x509.Certificate) string {
	var b bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.String()
}

// jsonStrings is list as a JSON array ("[]" when empty, never "null").
func jsonStrings(list []string) string {
	if list == nil {
		list = []string{}
	}
	b, _ := json.Marshal(list)
	return string(b)
}

// authenticationTrustWriter keeps the ConfigMap saying what required says, through client.
type authenticationTrustWriter struct {
	client   kubernetes.Interface
	required authenticationTrust
	now      func() time.Time
	log      *slog.Logger
}

// run checks the ConfigMap now and every interval until ctx ends.
func (w *authenticationTrustWriter) run(ctx context.Context, interval time.Duration) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := w.sync(ctx); err != nil {
			w.log.InfoContext(ctx, "ConfigMap "+authenticationTrustNamespace+"/"+authenticationTrustName+" not written", "err", err)
		}
	}, interval)
}

// sync creates the ConfigMap, or updates it when it lacks something required.
func (w *authenticationTrustWriter) sync(ctx context.Context) error {
	api := w.client.CoreV1().ConfigMaps(authenticationTrustNamespace)
	cur, err := api.Get(ctx, authenticationTrustName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: authenticationTrustName, Namespace: authenticationTrustNamespace},
			Data: w.required.data()}
		_, err = api.Create(ctx, cm, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	existing, err := parseAuthenticationTrust(cur.Data)
	if err != nil {
		// Data that cannot be read is replaced by what this server requires.
		existing = authenticationTrust{}
	}
	data := mergeAuthenticationTrust(existing, w.required, w.now()).data()
	if maps.Equal(data, cur.Data) {
		return nil
	}
	cur = cur.DeepCopy()
	cur.Data = data
	_, err = api.Update(ctx, cur, metav1.UpdateOptions{})
	return err
}
