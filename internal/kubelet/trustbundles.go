package kubelet

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
)

// trustBundleSyncTimeout is how long a lookup waits for the ClusterTrustBundle watch it
// starts to fill its cache.
const trustBundleSyncTimeout = 5 * time.Second

// errNoMatchingTrustBundles is a signer's clusterTrustBundle source that selects no
// bundle.
var errNoMatchingTrustBundles = errors.New("combination of signerName and labelSelector matched zero ClusterTrustBundles")

// clusterTrustBundles gives projected clusterTrustBundle sources their trust anchors
// from a watch of the cluster's ClusterTrustBundles (certificates.k8s.io/v1), started
// at the first lookup after Run (the kubelet of a cluster whose pods use none never
// watches them; lookups before Run ask the API server) and stopped when Run's context
// ends. onChange hears of every bundle added,
// changed or deleted (both versions on an update), so that the pods projecting it get
// their files rewritten.
type clusterTrustBundles struct {
	client   kubernetes.Interface
	onChange func(...*certificatesv1.ClusterTrustBundle)

	mu      sync.Mutex
	ctx     context.Context // Run's; nil before it
	factory informers.SharedInformerFactory
	lister  certlisters.ClusterTrustBundleLister
	synced  cache.InformerSynced
}

func newClusterTrustBundles(client kubernetes.Interface, onChange func(...*certificatesv1.ClusterTrustBundle)) *clusterTrustBundles {
	return &clusterTrustBundles{client: client, onChange: onChange}
}

// Run lets lookups start the watch, until ctx ends.
func (b *clusterTrustBundles) Run(ctx context.Context) {
	b.mu.Lock()
	b.ctx = ctx
	b.mu.Unlock()
	<-ctx.Done()
	b.mu.Lock()
	f := b.factory
	b.ctx, b.factory = nil, nil
	b.mu.Unlock()
	if f != nil {
		f.Shutdown()
	}
}

// list is the cluster's ClusterTrustBundles: from the watch, started when needed, or,
// before Run, from the API server.
func (b *clusterTrustBundles) list() ([]*certificatesv1.ClusterTrustBundle, error) {
	b.mu.Lock()
	ctx := b.ctx
	if ctx == nil {
		b.mu.Unlock()
		return b.listDirect()
	}
	if b.factory == nil {
		b.startWatch(ctx)
	}
	lister, synced := b.lister, b.synced
	b.mu.Unlock()
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, trustBundleSyncTimeout, true, func(context.Context) (bool, error) {
		return synced(), nil
	})
	if err != nil {
		return nil, fmt.Errorf("ClusterTrustBundle informer has not yet synced")
	}
	all, err := lister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list ClusterTrustBundles: %w", err)
	}
	return all, nil
}

// startWatch starts the informer of the ClusterTrustBundles until ctx ends; b.mu is held.
func (b *clusterTrustBundles) startWatch(ctx context.Context) {
	f := informers.NewSharedInformerFactory(b.client, 0)
	inf := f.Certificates().V1().ClusterTrustBundles()
	changed := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if ctb, ok := obj.(*certificatesv1.ClusterTrustBundle); ok && b.onChange != nil {
			b.onChange(ctb)
		}
	}
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: changed, DeleteFunc: changed,
		UpdateFunc: func(old, obj any) {
			o, _ := old.(*certificatesv1.ClusterTrustBundle)
			n, _ := obj.(*certificatesv1.ClusterTrustBundle)
			if o != nil && n != nil && b.onChange != nil {
				b.onChange(o, n)
			}
		}})
	b.factory, b.lister, b.synced = f, inf.Lister(), inf.Informer().HasSynced
	f.Start(ctx.Done())
}

// listDirect asks the API server for the ClusterTrustBundles.
func (b *clusterTrustBundles) listDirect() ([]*certificatesv1.ClusterTrustBundle, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := b.client.CertificatesV1().ClusterTrustBundles().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ClusterTrustBundles: %w", err)
	}
	out := make([]*certificatesv1.ClusterTrustBundle, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

// trustAnchors is the file of a clusterTrustBundle source: the certificates of the
// bundle it names, or of every bundle of its signer its label selector matches.
func (b *clusterTrustBundles) trustAnchors(src *corev1.ClusterTrustBundleProjection) ([]byte, error) {
	all, err := b.list()
	if err != nil {
		return nil, err
	}
	return selectTrustAnchors(all, src)
}

// selectTrustAnchors is the file of a clusterTrustBundle source among the bundles all:
// the bundle src names; or the bundles of src's signer that its label selector matches
// (a nil selector matches none, an empty one all). No bundle is an error unless the
// source is optional, which makes the file empty.
func selectTrustAnchors(all []*certificatesv1.ClusterTrustBundle, src *corev1.ClusterTrustBundleProjection) ([]byte, error) {
	optional := src.Optional != nil && *src.Optional
	switch {
	case src.Name != nil:
		for _, ctb := range all {
			if ctb.Name == *src.Name {
				return trustAnchorsOf([]*certificatesv1.ClusterTrustBundle{ctb}), nil
			}
		}
		if optional {
			return []byte{}, nil
		}
		return nil, fmt.Errorf("while getting ClusterTrustBundle: %w",
			apierrors.NewNotFound(certificatesv1.Resource("clustertrustbundle"), *src.Name))
	case src.SignerName != nil:
		selector, err := metav1.LabelSelectorAsSelector(src.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("while parsing label selector: %w", err)
		}
		var chosen []*certificatesv1.ClusterTrustBundle
		for _, ctb := range all {
			if ctb.Spec.SignerName == *src.SignerName && selector.Matches(labels.Set(ctb.Labels)) {
				chosen = append(chosen, ctb)
			}
		}
		if len(chosen) == 0 {
			if optional {
				return []byte{}, nil
			}
			return nil, errNoMatchingTrustBundles
		}
		return trustAnchorsOf(chosen), nil
	}
	return nil, errors.New("ClusterTrustBundle projection requires either name or signerName to be set")
}

// trustAnchorsOf is the PEM of the bundles' certificates: each distinct one once (by
// its DER bytes), in the order of those bytes, as CERTIFICATE blocks without headers.
func trustAnchorsOf(bundles []*certificatesv1.ClusterTrustBundle) []byte {
	var ders [][]byte
	for _, ctb := range bundles {
		rest := []byte(ctb.Spec.TrustBundle)
		for {
			var blk *pem.Block
			if blk, rest = pem.Decode(rest); blk == nil {
				break
			}
			ders = append(ders, blk.Bytes)
		}
	}
	slices.SortFunc(ders, bytes.Compare)
	ders = slices.CompactFunc(ders, bytes.Equal)
	out := []byte{}
	for _, der := range ders {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return out
}

// projectsTrustBundle says whether a projected volume of the pod takes its files from
// one of the bundles: by its name, or by its signer.
func projectsTrustBundle(pod *corev1.Pod, bundles []*certificatesv1.ClusterTrustBundle) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			src := s.ClusterTrustBundle
			if src == nil {
				continue
			}
			for _, ctb := range bundles {
				if src.Name != nil && *src.Name == ctb.Name || src.SignerName != nil && *src.SignerName == ctb.Spec.SignerName && ctb.Spec.SignerName != "" {
					return true
				}
			}
		}
	}
	return false
}

// onTrustBundleChange syncs the node's pods that project one of the bundles.
func (k *Kubelet) onTrustBundleChange(bundles ...*certificatesv1.ClusterTrustBundle) {
	pods, err := k.podLister.List(labelsEverything())
	if err != nil {
		return
	}
	for _, p := range pods {
		if p.Spec.NodeName == k.cfg.NodeName && p.DeletionTimestamp == nil && projectsTrustBundle(p, bundles) {
			k.queue.Add(p.Namespace + "/" + p.Name)
		}
	}
}
