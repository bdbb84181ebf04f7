package serviceaccount

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
)

// The OpenID Connect discovery paths of the issuer: relying parties outside the cluster
// (and pods, through the API server) read the issuer's metadata and its public keys
// there to check tokens without asking the API server about each.
const (
	OpenIDConfigurationPath = "/.well-known/openid-configuration"
	JWKSPath                = "/openid/v1/jwks"
)

// openIDConfiguration is the subset of OpenID provider metadata an issuer of ID tokens
// (and no login flows) has.
type openIDConfiguration struct {
	Issuer        string   `json:"issuer"`
	JWKSURI       string   `json:"jwks_uri"`
	ResponseTypes []string `json:"response_types_supported"`
	SubjectTypes  []string `json:"subject_types_supported"`
	SigningAlgs   []string `json:"id_token_signing_alg_values_supported"`
}

// OpenIDConfiguration is the discovery document of issuer whose keys are at jwksURI:
// response type id_token, public subjects, and the algorithms of keys (sorted).
func OpenIDConfiguration(issuer, jwksURI string, keys []crypto.PublicKey) ([]byte, error) {
	set, err := jwks(keys)
	if err != nil {
		return nil, err
	}
	var algs []string
	for _, k := range set.Keys {
		if !slices.Contains(algs, k.Alg) {
			algs = append(algs, k.Alg)
		}
	}
	slices.Sort(algs)
	return json.Marshal(openIDConfiguration{Issuer: issuer, JWKSURI: jwksURI,
		ResponseTypes: []string{"id_token"}, SubjectTypes: []string{"public"}, SigningAlgs: algs})
}

// JWKS is the JSON Web Key Set (RFC 7517) of keys: one signing key each, named by the
// kid tokens signed with it carry.
func JWKS(keys []crypto.PublicKey) ([]byte, error) {
	set, err := jwks(keys)
	if err != nil {
		return nil, err
	}
	return json.Marshal(set)
}

type jsonWebKeySet struct {
	Keys []jsonWebKey `json:"keys"`
}

type jsonWebKey struct {
	Use string `json:"use"`
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Crv string `json:"crv,omitempty"`
	Alg string `json:"alg"`
	N   string `json:"n,omitempty"`
	E   string `json:"e,omitempty"`
	X   string `json:"x,omitempty"`
	Y   string `json:"y,omitempty"`
}

func jwks(keys []crypto.PublicKey) (jsonWebKeySet, error) {
	set := jsonWebKeySet{Keys: []jsonWebKey{}}
	for i, k := range keys {
		jwk, err := jwkOf(k)
		if err != nil {
			return jsonWebKeySet{}, fmt.Errorf("service account key #%d: %w", i, err)
		}
		set.Keys = append(set.Keys, jwk)
	}
	return set, nil
}

// jwkOf is pub as a JWK: RSA keys sign RS256, ECDSA keys ES256/384/512 by their curve.
func jwkOf(pub crypto.PublicKey) (jsonWebKey, error) {
	kid, err := KeyID(pub)
	if err != nil {
		return jsonWebKey{}, err
	}
	b64 := base64.RawURLEncoding.EncodeToString
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return jsonWebKey{Use: "sig", Kty: "RSA", Kid: kid, Alg: "RS256",
			N: b64(k.N.Bytes()), E: b64(big.NewInt(int64(k.E)).Bytes())}, nil
	case *ecdsa.PublicKey:
		var alg string
		switch k.Curve {
		case elliptic.P256():
			alg = "ES256"
		case elliptic.P384():
			alg = "ES384"
		case elliptic.P521():
			alg = "ES512"
		default:
			return jsonWebKey{}, fmt.Errorf("curve %s is not supported (P-256, P-384 and P-521 are)", k.Curve.Params().Name)
		}
		// The uncompressed point: 0x04, then X and Y, each the curve's size.
		point, err := k.Bytes()
		if err != nil {
			return jsonWebKey{}, err
		}
		size := (len(point) - 1) / 2
		return jsonWebKey{Use: "sig", Kty: "EC", Kid: kid, Crv: k.Curve.Params().Name, Alg: alg,
			X: b64(point[1 : 1+size]), Y: b64(point[1+size:])}, nil
	}
	return jsonWebKey{}, fmt.Errorf("%T keys are not supported (ECDSA and RSA are)", pub)
}
