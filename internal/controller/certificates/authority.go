package certificates

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
)

// authority is a CA's certificate and private key: it signs certificate requests.
type authority struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// loadAuthority parses a PEM CA certificate and its PEM private key (SEC 1 EC, PKCS #1
// RSA or PKCS #8) and checks that they are a pair.
func loadAuthority(certPEM, keyPEM []byte) (*authority, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("the CA certificate is not a PEM CERTIFICATE")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse the CA certificate: %w", err)
	}
	var kb *pem.Block
	for rest := keyPEM; ; {
		kb, rest = pem.Decode(rest)
		if kb == nil || kb.Type != "EC PARAMETERS" {
			break
		}
	}
	if kb == nil {
		return nil, errors.New("the CA key is not PEM")
	}
	var key any
	switch kb.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(kb.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(kb.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(kb.Bytes)
	default:
		return nil, fmt.Errorf("the CA key is a PEM %q block", kb.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parse the CA key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("the CA key (%T) cannot sign", key)
	}
	if !samePublicKey(signer.Public(), cert.PublicKey) {
		return nil, errors.New("the CA key does not match the CA certificate")
	}
	return &authority{cert: cert, key: signer}, nil
}

func samePublicKey(a, b crypto.PublicKey) bool {
	switch k := a.(type) {
	case *ecdsa.PublicKey:
		return k.Equal(b)
	case *rsa.PublicKey:
		return k.Equal(b)
	case ed25519.PublicKey:
		return k.Equal(b)
	}
	return reflect.DeepEqual(a, b)
}

var serialLimit = new(big.Int).Lsh(big.NewInt(1), 128)

// sign issues a certificate for the request under policy and returns it DER encoded. The
// certificate carries the request's subject, SANs and public key; its usages, validity
// and constraints come from the policy.
func (a *authority) sign(cr *x509.CertificateRequest, policy signingPolicy) ([]byte, error) {
	if err := cr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("unable to verify certificate request signature: %w", err)
	}
	serial, err := rand.Int(rand.Reader, serialLimit)
	if err != nil {
		return nil, fmt.Errorf("unable to generate a serial number for %s: %w", cr.Subject.CommonName, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:       serial,
		Subject:            cr.Subject,
		DNSNames:           cr.DNSNames,
		IPAddresses:        cr.IPAddresses,
		EmailAddresses:     cr.EmailAddresses,
		URIs:               cr.URIs,
		PublicKeyAlgorithm: cr.PublicKeyAlgorithm,
		PublicKey:          cr.PublicKey,
	}
	if err := policy.apply(tmpl, a.cert.NotAfter); err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, cr.PublicKey, a.key)
	if err != nil {
		return nil, fmt.Errorf("failed to sign certificate: %w", err)
	}
	return der, nil
}

// signingPolicy is what the signer puts in every certificate beyond the request: the
// usages asked for, no extensions of the request, not a CA, and a validity of TTL from
// Now, started Backdate earlier (and ended Backdate earlier too unless TTL is shorter
// than Short), never past the CA's own end.
type signingPolicy struct {
	TTL      time.Duration
	Usages   []certificatesv1.KeyUsage
	Backdate time.Duration
	Short    time.Duration
	Now      time.Time
}

func (p signingPolicy) apply(tmpl *x509.Certificate, signerNotAfter time.Time) error {
	usage, extUsages, err := keyUsages(p.Usages)
	if err != nil {
		return err
	}
	tmpl.KeyUsage, tmpl.ExtKeyUsage = usage, extUsages
	tmpl.ExtraExtensions, tmpl.Extensions = nil, nil
	tmpl.BasicConstraintsValid, tmpl.IsCA = true, false

	tmpl.NotBefore = p.Now.Add(-p.Backdate)
	if p.TTL < p.Short {
		tmpl.NotAfter = p.Now.Add(p.TTL)
	} else {
		tmpl.NotAfter = p.Now.Add(p.TTL - p.Backdate)
	}
	if !tmpl.NotAfter.Before(signerNotAfter) {
		tmpl.NotAfter = signerNotAfter
	}
	if !tmpl.NotBefore.Before(signerNotAfter) {
		return fmt.Errorf("the signer has expired: NotAfter=%v", signerNotAfter)
	}
	if !p.Now.Before(signerNotAfter) {
		return fmt.Errorf("refusing to sign a certificate that expired in the past: NotAfter=%v", signerNotAfter)
	}
	return nil
}

var keyUsageOf = map[certificatesv1.KeyUsage]x509.KeyUsage{
	certificatesv1.UsageSigning:           x509.KeyUsageDigitalSignature,
	certificatesv1.UsageDigitalSignature:  x509.KeyUsageDigitalSignature,
	certificatesv1.UsageContentCommitment: x509.KeyUsageContentCommitment,
	certificatesv1.UsageKeyEncipherment:   x509.KeyUsageKeyEncipherment,
	certificatesv1.UsageKeyAgreement:      x509.KeyUsageKeyAgreement,
	certificatesv1.UsageDataEncipherment:  x509.KeyUsageDataEncipherment,
	certificatesv1.UsageCertSign:          x509.KeyUsageCertSign,
	certificatesv1.UsageCRLSign:           x509.KeyUsageCRLSign,
	certificatesv1.UsageEncipherOnly:      x509.KeyUsageEncipherOnly,
	certificatesv1.UsageDecipherOnly:      x509.KeyUsageDecipherOnly,
}

var extKeyUsageOf = map[certificatesv1.KeyUsage]x509.ExtKeyUsage{
	certificatesv1.UsageAny:             x509.ExtKeyUsageAny,
	certificatesv1.UsageServerAuth:      x509.ExtKeyUsageServerAuth,
	certificatesv1.UsageClientAuth:      x509.ExtKeyUsageClientAuth,
	certificatesv1.UsageCodeSigning:     x509.ExtKeyUsageCodeSigning,
	certificatesv1.UsageEmailProtection: x509.ExtKeyUsageEmailProtection,
	certificatesv1.UsageSMIME:           x509.ExtKeyUsageEmailProtection,
	certificatesv1.UsageIPsecEndSystem:  x509.ExtKeyUsageIPSECEndSystem,
	certificatesv1.UsageIPsecTunnel:     x509.ExtKeyUsageIPSECTunnel,
	certificatesv1.UsageIPsecUser:       x509.ExtKeyUsageIPSECUser,
	certificatesv1.UsageTimestamping:    x509.ExtKeyUsageTimeStamping,
	certificatesv1.UsageOCSPSigning:     x509.ExtKeyUsageOCSPSigning,
	certificatesv1.UsageMicrosoftSGC:    x509.ExtKeyUsageMicrosoftServerGatedCrypto,
	certificatesv1.UsageNetscapeSGC:     x509.ExtKeyUsageNetscapeServerGatedCrypto,
}

// keyUsages translates the usages of a request into the key usage bits and the sorted,
// deduplicated extended key usages of a certificate.
func keyUsages(usages []certificatesv1.KeyUsage) (x509.KeyUsage, []x509.ExtKeyUsage, error) {
	var ku x509.KeyUsage
	var ext []x509.ExtKeyUsage
	var unrecognized []certificatesv1.KeyUsage
	for _, u := range usages {
		if v, ok := keyUsageOf[u]; ok {
			ku |= v
		} else if v, ok := extKeyUsageOf[u]; ok {
			if !slices.Contains(ext, v) {
				ext = append(ext, v)
			}
		} else {
			unrecognized = append(unrecognized, u)
		}
	}
	if len(unrecognized) > 0 {
		return 0, nil, fmt.Errorf("unrecognized usage values: %q", unrecognized)
	}
	slices.Sort(ext)
	return ku, ext, nil
}
