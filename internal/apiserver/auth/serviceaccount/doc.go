// Package serviceaccount is how the API server issues and checks ServiceAccount tokens:
// the bearer tokens pods (and `kubectl create token`) present as
// system:serviceaccount:<namespace>:<name>.
//
// In the request path "kubectl apply → API server → authentication → authorization →
// admission → etcd" it is part of authentication: Authenticator is an
// authenticator.Token the API server asks about every bearer token. The tokens come
// from the TokenRequest API (POST serviceaccounts/<name>/token), which signs them with
// Issuer; the kubelet asks it for the token of each pod's projected
// serviceAccountToken volume source.
//
// A token is a JWT signed with the key pair of the PKI (<data-dir>/pki/sa.key and
// sa.pub, EnsureKeyPair): ES256 for the ECDSA P-256 key kubelab makes, RS256 for an RSA
// key put there instead. Its header names the key (kid: the unpadded base64url SHA-256
// of the public key's PKIX DER form). Its claims are iss (the issuer's name,
// DefaultIssuer unless configured), sub (system:serviceaccount:<ns>:<name>), aud, exp,
// iat, nbf, jti (a random UUID) and the private claim "kubernetes.io": {namespace,
// serviceaccount{name,uid}} plus pod{name,uid} or secret{name,uid} when the token is
// bound to that object, node{name,uid} when it is bound to a node or to a pod on a node,
// and warnafter when its expiration was extended.
//
// Contract of Authenticator.AuthenticateToken:
//   - a token that is no JWT, or whose iss is none of the accepted issuers, is not
//     ours: (nil, false, nil), so that the other token authenticators may try it;
//   - ours but not signed by a key of sa.pub, without an audience the request's API
//     audiences (default: the accepted issuers) share, expired (exp plus a minute of leeway),
//     not yet valid or issued in the future: an error;
//   - the ServiceAccount must exist with the token's uid, and so must the bound pod or
//     secret (or node, for a node-bound token); an object whose deletionTimestamp is more
//     than a minute in the past invalidates the token too (one being deleted gracefully
//     keeps its tokens valid until then);
//   - otherwise the user is system:serviceaccount:<ns>:<name> with the account's uid, in
//     groups system:serviceaccounts and system:serviceaccounts:<ns>, with extra
//     authentication.kubernetes.io/pod-name and pod-uid (pod-bound tokens),
//     node-name and node-uid (when the token names a node) and credential-id
//     ("JTI=<jti>").
//
// OpenIDConfiguration and JWKS are the issuer's OpenID Connect discovery document and
// JSON Web Key Set (each key with its kid, use "sig" and its algorithm), which the API
// server serves at OpenIDConfigurationPath and JWKSPath.
//
// The objects are read through Getter: ClusterGetter reads the informers' caches of
// the API server's loopback client once they have synced, and the API itself before
// that, when the cache misses, or when the cached object has another uid (a token for
// a pod created a moment ago).
package serviceaccount
