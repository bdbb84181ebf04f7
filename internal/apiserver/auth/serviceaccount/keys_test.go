package serviceaccount

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnsureKeyPair(t *testing.T) {
	dir := t.TempDir()
	keyFile, pubFile := filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := EnsureKeyPair(keyFile, pubFile); err != nil {
		t.Fatal(err)
	}
	for path, mode := range map[string]os.FileMode{keyFile: 0o600, pubFile: 0o644} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v %v, want mode %o", path, fi, err, mode)
		}
	}
	key, err := LoadSigningKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := key.(*ecdsa.PrivateKey); !ok {
		t.Errorf("key is %T, want ECDSA", key)
	}
	pubs, err := LoadPublicKeys(pubFile)
	if err != nil || len(pubs) != 1 || !key.Public().(*ecdsa.PublicKey).Equal(pubs[0]) {
		t.Fatalf("public keys %v, %v: not the key's", pubs, err)
	}

	// A second call keeps the pair.
	before, _ := os.ReadFile(keyFile)
	if err := EnsureKeyPair(keyFile, pubFile); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(keyFile); string(after) != string(before) {
		t.Error("the key was replaced")
	}

	// Only the private key: the public one is derived from it.
	if err := os.Remove(pubFile); err != nil {
		t.Fatal(err)
	}
	if err := EnsureKeyPair(keyFile, pubFile); err != nil {
		t.Fatal(err)
	}
	if pubs, err := LoadPublicKeys(pubFile); err != nil || !key.Public().(*ecdsa.PublicKey).Equal(pubs[0]) {
		t.Errorf("derived public key %v, %v", pubs, err)
	}

	// Only the public key: refused rather than replaced.
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	if err := EnsureKeyPair(keyFile, pubFile); err == nil || !strings.Contains(err.Error(), "does not") {
		t.Errorf("a public key without its private key: %v", err)
	}
}

// Keys in kubeadm's RSA layout (PKCS #1 private key, PKIX public key) load, and a
// public key file may hold several keys.
func TestLoadRSAKeysAndKeySets(t *testing.T) {
	dir := t.TempDir()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "sa.key")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)}), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, err := LoadSigningKey(keyFile); err != nil || !rsaKey.Equal(k) {
		t.Errorf("RSA key: %v", err)
	}
	var pubs []byte
	for _, pub := range []any{&rsaKey.PublicKey, ecKey(t).Public()} {
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		pubs = append(pubs, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})...)
	}
	pubFile := filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(pubFile, pubs, 0o644); err != nil {
		t.Fatal(err)
	}
	if keys, err := LoadPublicKeys(pubFile); err != nil || len(keys) != 2 {
		t.Errorf("key set: %d keys, %v", len(keys), err)
	}

	if err := os.WriteFile(pubFile, []byte("not a key\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPublicKeys(pubFile); err == nil || !strings.Contains(err.Error(), "holds no public key") {
		t.Errorf("garbage public key file: %v", err)
	}
	if _, err := LoadSigningKey(pubFile); err == nil || !strings.Contains(err.Error(), "holds no private key") {
		t.Errorf("garbage private key file: %v", err)
	}
}
