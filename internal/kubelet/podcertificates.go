package kubelet

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// podCertificateKey is one podCertificate source of one pod.
type podCertificateKey struct {
	pod    types.UID
	volume string
	source int
}

// podCredential is the state of one podCertificate source: the key and chain issued
// last (none before the first issuance) and when to ask for the next, the request
// waiting for a signer with the key it is for, or the signer's refusal.
type podCredential struct {
	key, chain     []byte
	beginRefreshAt time.Time

	pending    string // name of the PodCertificateRequest waiting for its signer
	pendingKey []byte

	refused error // the signer denied the request or failed it: for good
}

// podCertificates gives projected podCertificate sources their files, as upstream's
// kubelet does: for each source of each pod, a new private key of the source's key type
// and a PodCertificateRequest (owned by the pod, for it, its service account and the
// node, with the source's signer, maxExpirationSeconds and user annotations, and an
// empty PKCS#10 request signed with the key); the source's files once the signer issued
// the certificate (until then the volume is not ready, and the pod waits); a new key
// and request at the certificate's beginRefreshAt, the files keeping the old ones until
// the new are issued. A denied or failed request fails the volume for good, with a
// Warning event. The requests of the node are watched (spec.nodeName), from the first
// lookup after Run, so that a pod is synced again when one of its requests changes.
type podCertificates struct {
	client   kubernetes.Interface
	nodeName string
	// nodeUID is the UID of the node's Node object.
	nodeUID  func() (types.UID, error)
	clock    clock.PassiveClock
	recorder record.EventRecorder
	// onChange hears of each request of the node added or changed: its namespace and pod.
	onChange func(namespace, pod string)

	mu     sync.Mutex
	ctx    context.Context // Run's; nil before it
	lister certlisters.PodCertificateRequestLister
	creds  map[podCertificateKey]*podCredential
}

func newPodCertificates(client kubernetes.Interface, nodeName string, nodeUID func() (types.UID, error), clk clock.PassiveClock,
	recorder record.EventRecorder, onChange func(namespace, pod string)) *podCertificates {
	return &podCertificates{client: client, nodeName: nodeName, nodeUID: nodeUID, clock: clk, recorder: recorder, onChange: onChange,
		creds: map[podCertificateKey]*podCredential{}}
}

// Run lets lookups start the watch of the node's requests, until ctx ends.
func (m *podCertificates) Run(ctx context.Context) {
	m.mu.Lock()
	m.ctx = ctx
	m.mu.Unlock()
	<-ctx.Done()
	m.mu.Lock()
	m.ctx, m.lister = nil, nil
	m.mu.Unlock()
}

// watch is the cache of the node's requests, started when needed (nil before Run).
// m.mu is held.
func (m *podCertificates) watch() certlisters.PodCertificateRequestLister {
	if m.ctx == nil || m.lister != nil {
		return m.lister
	}
	f := informers.NewSharedInformerFactoryWithOptions(m.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", m.nodeName).String()
	}))
	inf := f.Certificates().V1().PodCertificateRequests()
	changed := func(obj any) {
		if r, ok := obj.(*certificatesv1.PodCertificateRequest); ok && m.onChange != nil {
			m.onChange(r.Namespace, r.Spec.PodName)
		}
	}
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: changed, UpdateFunc: func(_, obj any) { changed(obj) }})
	m.lister = inf.Lister()
	ctx := m.ctx
	f.Start(ctx.Done())
	go func() { <-ctx.Done(); f.Shutdown() }()
	return m.lister
}

// credentials are the private key (PEM) and certificate chain of the pod's source
// (source index of volume), and when to look again (the certificate's beginRefreshAt).
// Before the first issuance it is an error: the request is made, or still waits.
func (m *podCertificates) credentials(ctx context.Context, pod *corev1.Pod, volume string, index int, src *corev1.PodCertificateProjection) ([]byte, []byte, time.Time, error) {
	key := podCertificateKey{pod: pod.UID, volume: volume, source: index}
	m.mu.Lock()
	cred := m.creds[key]
	if cred == nil {
		cred = &podCredential{}
		m.creds[key] = cred
	}
	lister := m.watch()
	m.mu.Unlock()
	// One source is worked on by its pod's sync only; the lock guards the map.
	if cred.refused != nil {
		return nil, nil, time.Time{}, cred.refused
	}
	if cred.pending != "" {
		if err := m.check(ctx, pod, cred, lister); err != nil {
			return nil, nil, time.Time{}, err
		}
	}
	issued := cred.chain != nil
	if cred.pending == "" && (!issued || !m.clock.Now().Before(cred.beginRefreshAt)) {
		if err := m.request(ctx, pod, src, cred); err != nil {
			if issued {
				// The certificate issued before is still served; the refresh is retried.
				return cred.key, cred.chain, m.clock.Now().Add(tokenRetry), nil
			}
			return nil, nil, time.Time{}, err
		}
	}
	if !issued {
		return nil, nil, time.Time{}, fmt.Errorf("no certificate yet: PodCertificateRequest %s/%s waits for signer %q", pod.Namespace, cred.pending, src.SignerName)
	}
	next := cred.beginRefreshAt
	if cred.pending != "" {
		// A refresh waits for its signer (its issuance also syncs the pod).
		next = m.clock.Now().Add(tokenRetry)
	}
	return cred.key, cred.chain, next, nil
}

// request makes a new key and a PodCertificateRequest for it, which cred then waits for.
func (m *podCertificates) request(ctx context.Context, pod *corev1.Pod, src *corev1.PodCertificateProjection, cred *podCredential) error {
	sa, err := m.client.CoreV1().ServiceAccounts(pod.Namespace).Get(ctx, pod.Spec.ServiceAccountName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("while fetching service account: %w", err)
	}
	nodeUID, err := m.nodeUID()
	if err != nil {
		return fmt.Errorf("while getting node object: %w", err)
	}
	priv, stub, err := newKeyAndStubRequest(src.KeyType)
	if err != nil {
		return fmt.Errorf("while generating keypair: %w", err)
	}
	keyPEM, err := privateKeyPEM(priv)
	if err != nil {
		return err
	}
	req := &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, GenerateName: "req-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}},
		Spec: certificatesv1.PodCertificateRequestSpec{SignerName: src.SignerName, PodName: pod.Name, PodUID: pod.UID,
			ServiceAccountName: pod.Spec.ServiceAccountName, ServiceAccountUID: sa.UID,
			NodeName: types.NodeName(m.nodeName), NodeUID: nodeUID, MaxExpirationSeconds: src.MaxExpirationSeconds,
			StubPKCS10Request: stub, UnverifiedUserAnnotations: src.UserAnnotations},
	}
	created, err := m.client.CertificatesV1().PodCertificateRequests(pod.Namespace).Create(ctx, req, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("while creating PodCertificateRequest: %w", err)
	}
	cred.pending, cred.pendingKey = created.Name, keyPEM
	return nil
}

// check looks at the request cred waits for: issued, its key and chain become cred's;
// denied or failed, cred is refused (a Warning event says why); gone, a new one will be
// made. A request not yet in the watch's cache is read from the API server.
func (m *podCertificates) check(ctx context.Context, pod *corev1.Pod, cred *podCredential, lister certlisters.PodCertificateRequestLister) error {
	var r *certificatesv1.PodCertificateRequest
	var err error
	if lister != nil {
		r, err = lister.PodCertificateRequests(pod.Namespace).Get(cred.pending)
	}
	if lister == nil || apierrors.IsNotFound(err) {
		r, err = m.client.CertificatesV1().PodCertificateRequests(pod.Namespace).Get(ctx, cred.pending, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		cred.pending, cred.pendingKey = "", nil
		return nil
	}
	if err != nil {
		return fmt.Errorf("while getting PodCertificateRequest %s/%s: %w", pod.Namespace, cred.pending, err)
	}
	for _, c := range r.Status.Conditions {
		if c.Status != metav1.ConditionTrue {
			continue
		}
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeIssued:
			if r.Status.BeginRefreshAt == nil {
				return fmt.Errorf("PodCertificateRequest %s/%s is issued without beginRefreshAt", r.Namespace, r.Name)
			}
			cred.key, cred.chain = cred.pendingKey, cleanChain([]byte(r.Status.CertificateChain))
			cred.beginRefreshAt = r.Status.BeginRefreshAt.Time
			cred.pending, cred.pendingKey = "", nil
			return nil
		case certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
			verb := "was denied"
			if c.Type == certificatesv1.PodCertificateRequestConditionTypeFailed {
				verb = "failed"
			}
			msg := fmt.Sprintf("PodCertificateRequest %s/%s %s, reason=%q, message=%q", r.Namespace, r.Name, verb, c.Reason, c.Message)
			if m.recorder != nil {
				m.recorder.Event(pod, corev1.EventTypeWarning, c.Type, msg)
			}
			cred.refused = errors.New(msg)
			cred.pending, cred.pendingKey = "", nil
			return cred.refused
		}
	}
	return nil
}

// forget drops the keys and certificates of the pod.
func (m *podCertificates) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.creds {
		if k.pod == uid {
			delete(m.creds, k)
		}
	}
}

// newKeyAndStubRequest is a new private key of a podCertificate key type and an empty
// PKCS#10 request signed with it.
func newKeyAndStubRequest(keyType string) (crypto.Signer, []byte, error) {
	var key crypto.Signer
	var err error
	switch keyType {
	case "RSA3072":
		key, err = rsa.GenerateKey(rand.Reader, 3072)
	case "RSA4096":
		key, err = rsa.GenerateKey(rand.Reader, 4096)
	case "ECDSAP256":
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ECDSAP384":
		key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ECDSAP521":
		key, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "ED25519":
		_, key, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, nil, fmt.Errorf("unknown key type %q", keyType)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("generate %s key: %w", keyType, err)
	}
	stub, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("while generating stub PKCS#10 request: %w", err)
	}
	return key, stub, nil
}

// privateKeyPEM is the key as a PKCS#8 PRIVATE KEY block.
func privateKeyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("while marshaling key to PKCS#8: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// cleanChain is the chain's PEM blocks as CERTIFICATE blocks, without headers or text
// between them.
func cleanChain(in []byte) []byte {
	var out []byte
	for {
		var blk *pem.Block
		if blk, in = pem.Decode(in); blk == nil {
			return out
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: blk.Bytes})...)
	}
}

// onPodCertificateChange syncs the pod a request of the node is for.
func (k *Kubelet) onPodCertificateChange(namespace, pod string) {
	k.queue.Add(namespace + "/" + pod)
}

// registeredNodeUID is the UID of the kubelet's Node object, once it registered.
func (k *Kubelet) registeredNodeUID() (types.UID, error) {
	uid := k.nodeUID.Load()
	if uid == nil {
		return "", fmt.Errorf("node %s is not registered yet", k.cfg.NodeName)
	}
	return *uid, nil
}
