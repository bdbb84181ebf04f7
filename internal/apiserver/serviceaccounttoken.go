package apiserver

import (
	"context"
	"crypto"
	"fmt"
	"slices"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/audit"
	apiserverserviceaccount "k8s.io/apiserver/pkg/authentication/serviceaccount"
	tokenjwt "k8s.io/apiserver/pkg/authentication/token/jwt"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/auth/serviceaccount"
)

// The TokenRequest limits and defaults: spec.expirationSeconds is 3600 when unset, at
// least 10 minutes and at most 2^32 seconds (there is no lower cap). A pod-bound token of the kubelet's
// 3607 seconds for the API server's audiences is valid for a year instead, with
// warnafter at the 3607 seconds, so that clients that never reread their token keep
// working while the audit log names them (authentication.k8s.io/stale-token).
const (
	defaultTokenExpirationSeconds = 60 * 60
	minTokenExpirationSeconds     = 10 * 60
	maxTokenExpirationSeconds     = 1 << 32
	warnOnlyTokenExpirationSecs   = 60*60 + 7
	extendedTokenExpirationSecs   = 24 * 365 * 60 * 60
)

// serviceAccountTokens is the API server's side of service account tokens: the issuer
// serviceaccounts/token signs with (sa.key) and the bearer-token authenticator that
// checks them (sa.pub), reading the objects tokens name through the loopback client's
// informers (serviceaccount.ClusterGetter).
type serviceAccountTokens struct {
	issuer *serviceaccount.Issuer
	authn  *serviceaccount.Authenticator
	client kubernetes.Interface
	// keys are the public keys tokens are checked with (sa.pub).
	keys []crypto.PublicKey
	// audiences are the API server's own: a TokenRequest without spec.audiences gets them.
	audiences []string
	// extendExpiration extends the kubelet's tokens as the constants above say.
	extendExpiration bool
}

// newServiceAccountTokens loads the PKI's service account key pair and registers the
// informers the authenticator reads on factory. The first of issuers signs; tokens of
// any are accepted, and all are the API server's audiences.
func newServiceAccountTokens(p PKI, issuers []string, client kubernetes.Interface, factory informers.SharedInformerFactory) (*serviceAccountTokens, error) {
	key, err := serviceaccount.LoadSigningKey(p.ServiceAccountKey())
	if err != nil {
		return nil, err
	}
	pubs, err := serviceaccount.LoadPublicKeys(p.ServiceAccountPublicKey())
	if err != nil {
		return nil, err
	}
	if len(issuers) == 0 {
		issuers = []string{serviceaccount.DefaultIssuer}
	}
	issuer, err := serviceaccount.NewIssuer(serviceaccount.IssuerConfig{Issuer: issuers[0], Key: key})
	if err != nil {
		return nil, err
	}
	audiences := slices.Clone(issuers)
	authn, err := serviceaccount.NewAuthenticator(serviceaccount.AuthenticatorConfig{Issuers: issuers, Keys: pubs, Audiences: audiences},
		serviceaccount.NewClusterGetter(client, factory))
	if err != nil {
		return nil, err
	}
	return &serviceAccountTokens{issuer: issuer, authn: authn, client: client, keys: pubs, audiences: audiences, extendExpiration: true}, nil
}

// tokenREST serves serviceaccounts/token: a TokenRequest for the service account,
// answered with a signed token (status.token) and its expiration; nothing is stored.
type tokenREST struct {
	serviceAccounts rest.Getter
	tokens          *serviceAccountTokens
}

var (
	_ rest.NamedCreater             = (*tokenREST)(nil)
	_ rest.GroupVersionKindProvider = (*tokenREST)(nil)
)

var tokenRequestKind = authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")

func (r *tokenREST) New() runtime.Object   { return &authenticationv1.TokenRequest{} }
func (r *tokenREST) Destroy()              {}
func (r *tokenREST) NamespaceScoped() bool { return true }
func (r *tokenREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return tokenRequestKind
}

func (r *tokenREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	req, ok := obj.(*authenticationv1.TokenRequest)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a TokenRequest object: %T", obj))
	}
	namespace, ok := genericapirequest.NamespaceFrom(ctx)
	if !ok || namespace == "" {
		return nil, apierrors.NewBadRequest("namespace is required")
	}
	gk := tokenRequestKind.GroupKind()
	if req.Name != "" && req.Name != name {
		return nil, apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), req.Name, "must match the service account name if specified")})
	}
	if req.Namespace != "" && req.Namespace != namespace {
		return nil, apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("metadata", "namespace"), req.Namespace, "must match the service account namespace if specified")})
	}
	saObj, err := r.serviceAccounts.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	sa := saObj.(*corev1.ServiceAccount)

	req = req.DeepCopy()
	if len(req.Spec.Audiences) == 0 {
		req.Spec.Audiences = append([]string(nil), r.tokens.audiences...)
	}
	if req.Spec.ExpirationSeconds == nil {
		req.Spec.ExpirationSeconds = ptr.To[int64](defaultTokenExpirationSeconds)
	}
	req.Name, req.Namespace = sa.Name, sa.Namespace
	// The time before the token is made, so that status.expirationTimestamp is never
	// after the token's exp.
	now := r.tokens.issuer.Now()
	req.CreationTimestamp = metav1.NewTime(now)
	req.Status = authenticationv1.TokenRequestStatus{}
	if errs := validateTokenRequest(req); len(errs) > 0 {
		return nil, apierrors.NewInvalid(gk, "", errs)
	}
	if createValidation != nil {
		if err := createValidation(ctx, req.DeepCopyObject()); err != nil {
			return nil, err
		}
	}

	spec := serviceaccount.TokenSpec{ServiceAccount: sa, Audiences: req.Spec.Audiences}
	if ref := req.Spec.BoundObjectRef; ref != nil {
		if err := r.bind(ctx, namespace, name, ref, &spec); err != nil {
			return nil, err
		}
	}
	exp := *req.Spec.ExpirationSeconds
	if r.tokens.extendExpiration && spec.Pod != nil && exp == warnOnlyTokenExpirationSecs &&
		sets.New(r.tokens.audiences...).HasAll(req.Spec.Audiences...) {
		spec.WarnAfter = time.Duration(exp) * time.Second
		exp = extendedTokenExpirationSecs
	}
	spec.Expiration = time.Duration(exp) * time.Second
	token, claims, err := r.tokens.issuer.Issue(spec)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to generate token: %w", err))
	}
	audit.AddAuditAnnotation(ctx, apiserverserviceaccount.IssuedCredentialIDAuditAnnotationKey, tokenjwt.CredentialIDForJTI(claims.ID))
	req.Status = authenticationv1.TokenRequestStatus{
		Token:               token,
		ExpirationTimestamp: metav1.NewTime(now.Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second)),
	}
	return req, nil
}

// validateTokenRequest checks spec.expirationSeconds.
func validateTokenRequest(req *authenticationv1.TokenRequest) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec", "expirationSeconds")
	switch exp := *req.Spec.ExpirationSeconds; {
	case exp < minTokenExpirationSeconds:
		errs = append(errs, field.Invalid(path, exp, "may not specify a duration less than 10 minutes"))
	case exp > maxTokenExpirationSeconds:
		errs = append(errs, field.Invalid(path, exp, "may not specify a duration larger than 2^32 seconds"))
	}
	return errs
}

// bind resolves spec.boundObjectRef: a Pod running as the service account, a Secret of
// the namespace or a Node, with the uid the reference names (if it names one). A pod on
// a node binds the node's name and uid into the token too.
func (r *tokenREST) bind(ctx context.Context, namespace, saName string, ref *authenticationv1.BoundObjectReference, spec *serviceaccount.TokenSpec) error {
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	core := r.tokens.client.CoreV1()
	var uid types.UID
	switch {
	case gvk.Group == "" && gvk.Kind == "Pod":
		pod, err := core.Pods(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.Spec.ServiceAccountName != saName {
			return apierrors.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to pod running with different serviceaccount name.", saName))
		}
		spec.Pod, uid = pod, pod.UID
		if nodeName := pod.Spec.NodeName; nodeName != "" {
			node, err := core.Nodes().Get(ctx, nodeName, metav1.GetOptions{ResourceVersion: "0"})
			switch {
			case apierrors.IsNotFound(err):
				// The token still names the node, without its uid.
				node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
			case err != nil:
				return apierrors.NewInternalError(err)
			}
			spec.Node = node
		}
	case gvk.Group == "" && gvk.Kind == "Node":
		node, err := core.Nodes().Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		spec.Node, uid = node, node.UID
	case gvk.Group == "" && gvk.Kind == "Secret":
		secret, err := core.Secrets(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		spec.Secret, uid = secret, secret.UID
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("cannot bind token to object of type %s", gvk.String()))
	}
	if ref.UID != "" && ref.UID != uid {
		return apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, ref.Name,
			fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	return nil
}
