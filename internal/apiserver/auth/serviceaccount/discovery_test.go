package serviceaccount

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"reflect"
	"testing"
)

// keyOf reads a public key back from its JWK.
func keyOf(t *testing.T, jwk jsonWebKey) crypto.PublicKey {
	t.Helper()
	num := func(s string) *big.Int {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return new(big.Int).SetBytes(b)
	}
	switch jwk.Kty {
	case "RSA":
		return &rsa.PublicKey{N: num(jwk.N), E: int(num(jwk.E).Int64())}
	case "EC":
		x, _ := base64.RawURLEncoding.DecodeString(jwk.X)
		y, _ := base64.RawURLEncoding.DecodeString(jwk.Y)
		curves := map[string]elliptic.Curve{"P-256": elliptic.P256(), "P-384": elliptic.P384()}
		k, err := ecdsa.ParseUncompressedPublicKey(curves[jwk.Crv], append(append([]byte{4}, x...), y...))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	t.Fatalf("kty %q", jwk.Kty)
	return nil
}

// The key set names each key by the kid tokens carry and gives it back whole; the
// discovery document names the issuer, the key set's address and the keys' algorithms.
func TestOpenIDDiscovery(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ec384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rs, _ := rsa.GenerateKey(rand.Reader, 2048)
	keys := []crypto.PublicKey{ec.Public(), rs.Public(), ec384.Public()}

	raw, err := JWKS(keys)
	if err != nil {
		t.Fatal(err)
	}
	var set jsonWebKeySet
	if err := json.Unmarshal(raw, &set); err != nil || len(set.Keys) != 3 {
		t.Fatalf("key set %s: %v", raw, err)
	}
	wantAlg := []string{"ES256", "RS256", "ES384"}
	for i, jwk := range set.Keys {
		kid, _ := KeyID(keys[i])
		if jwk.Kid != kid || jwk.Use != "sig" || jwk.Alg != wantAlg[i] {
			t.Errorf("key %d: %+v, want kid %s, use sig, alg %s", i, jwk, kid, wantAlg[i])
		}
		if got := keyOf(t, jwk); !keys[i].(interface{ Equal(crypto.PublicKey) bool }).Equal(got) {
			t.Errorf("key %d does not read back as itself", i)
		}
	}

	doc, err := OpenIDConfiguration("https://issuer.example", "https://10.0.0.1:6443"+JWKSPath, keys)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(doc, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"issuer": "https://issuer.example", "jwks_uri": "https://10.0.0.1:6443/openid/v1/jwks",
		"response_types_supported": []any{"id_token"}, "subject_types_supported": []any{"public"},
		"id_token_signing_alg_values_supported": []any{"ES256", "ES384", "RS256"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("discovery document %v, want %v", got, want)
	}
}
