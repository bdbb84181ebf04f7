package serviceaccount

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/kubelab/kubelab/internal/util/atomicfile"
)

// EnsureKeyPair makes sure keyFile holds the private key tokens are signed with and
// pubFile the public keys they are checked with. Missing both, it makes an ECDSA P-256
// key (keyFile "EC PRIVATE KEY", mode 0600; pubFile "PUBLIC KEY", mode 0644). With only
// keyFile, pubFile is derived from it. Existing files are kept as they are, so tokens
// stay valid across restarts.
func EnsureKeyPair(keyFile, pubFile string) error {
	_, keyErr := os.Stat(keyFile)
	_, pubErr := os.Stat(pubFile)
	switch {
	case keyErr == nil && pubErr == nil:
		return nil
	case keyErr == nil && errors.Is(pubErr, fs.ErrNotExist):
		key, err := LoadSigningKey(keyFile)
		if err != nil {
			return err
		}
		return writePublicKey(pubFile, key.Public())
	case errors.Is(keyErr, fs.ErrNotExist) && pubErr == nil:
		return fmt.Errorf("service account key: %s exists but %s does not", pubFile, keyFile)
	case keyErr != nil && !errors.Is(keyErr, fs.ErrNotExist):
		return fmt.Errorf("service account key: %w", keyErr)
	case pubErr != nil && !errors.Is(pubErr, fs.ErrNotExist):
		return fmt.Errorf("service account key: %w", pubErr)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	if err := atomicfile.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	return writePublicKey(pubFile, key.Public())
}

func writePublicKey(path string, pub crypto.PublicKey) error {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return fmt.Errorf("service account public key: %w", err)
	}
	return atomicfile.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644)
}

// LoadSigningKey reads the private key of keyFile: PEM "EC PRIVATE KEY" (P-256),
// "RSA PRIVATE KEY" or "PRIVATE KEY" (PKCS #8, either kind).
func LoadSigningKey(keyFile string) (crypto.Signer, error) {
	data, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("service account key: %w", err)
	}
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, fmt.Errorf("service account key: %s holds no private key", keyFile)
		}
		var key any
		switch b.Type {
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("service account key: parse %s: %w", keyFile, err)
		}
		signer, err := checkKey(key)
		if err != nil {
			return nil, fmt.Errorf("service account key %s: %w", keyFile, err)
		}
		return signer, nil
	}
}

// checkKey accepts the private keys tokens can be signed with.
func checkKey(key any) (crypto.Signer, error) {
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("ECDSA curve %s is not supported (P-256 is)", k.Curve.Params().Name)
		}
		return k, nil
	case *rsa.PrivateKey:
		return k, nil
	}
	return nil, fmt.Errorf("%T keys are not supported (ECDSA P-256 and RSA are)", key)
}

// LoadPublicKeys reads every public key of pubFile (PEM "PUBLIC KEY" or
// "RSA PUBLIC KEY" blocks): tokens signed by any of them are accepted.
func LoadPublicKeys(pubFile string) ([]crypto.PublicKey, error) {
	data, err := os.ReadFile(pubFile)
	if err != nil {
		return nil, fmt.Errorf("service account public keys: %w", err)
	}
	var keys []crypto.PublicKey
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		var key any
		switch b.Type {
		case "PUBLIC KEY":
			key, err = x509.ParsePKIXPublicKey(b.Bytes)
		case "RSA PUBLIC KEY":
			key, err = x509.ParsePKCS1PublicKey(b.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("service account public keys: parse %s: %w", pubFile, err)
		}
		switch k := key.(type) {
		case *ecdsa.PublicKey, *rsa.PublicKey:
			keys = append(keys, k)
		default:
			return nil, fmt.Errorf("service account public keys: %s: %T keys are not supported", pubFile, key)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("service account public keys: %s holds no public key", pubFile)
	}
	return keys, nil
}

// KeyID is the kid of tokens signed with the key whose public half is pub: the unpadded
// base64url SHA-256 of its PKIX DER form.
func KeyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("key id: %w", err)
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}
