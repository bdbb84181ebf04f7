package cloud

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// sigv4Check is what a request's signature is checked against.
type sigv4Check struct {
	// secretFor is the secret access key of an access key id, or the error to send when
	// the key is unknown.
	secretFor func(accessKeyID string) (string, *apiError)
	// regions are those the credential scope may name.
	regions []string
	// service is the signing name the credential scope must name ("ec2", "iam", …).
	service string
	now     time.Time
}

// staticKey is a secretFor that knows one key pair.
func staticKey(accessKey, secretKey string) func(string) (string, *apiError) {
	return func(id string) (string, *apiError) {
		if id != accessKey {
			return "", errUnknownKey(id)
		}
		return secretKey, nil
	}
}

func errUnknownKey(id string) *apiError {
	return &apiError{Code: "AuthFailure", Message: "AWS was not able to validate the provided access credentials: unknown access key " + id + ".", Status: http.StatusUnauthorized}
}

// verifySigV4 checks r's AWS Signature Version 4 (Authorization header). body is the
// request's payload. It returns the access key id when the signature is valid, else the
// error to send.
func verifySigV4(r *http.Request, body []byte, chk sigv4Check) (string, *apiError) {
	region, service, now := chk.regions[0], chk.service, chk.now
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return "", &apiError{Code: "MissingAuthenticationToken", Message: "Request is missing Authentication Token", Status: http.StatusUnauthorized}
	}
	algo, rest, _ := strings.Cut(auth, " ")
	if algo != "AWS4-HMAC-SHA256" {
		return "", &apiError{Code: "IncompleteSignature", Message: "Unsupported signature algorithm " + algo + "; only AWS4-HMAC-SHA256 is accepted.", Status: http.StatusBadRequest}
	}
	fields := map[string]string{}
	for _, part := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if ok {
			fields[k] = v
		}
	}
	cred, signed, sig := fields["Credential"], fields["SignedHeaders"], fields["Signature"]
	if cred == "" || signed == "" || sig == "" {
		return "", &apiError{Code: "IncompleteSignature", Message: "Authorization header requires Credential, SignedHeaders and Signature.", Status: http.StatusBadRequest}
	}
	credParts := strings.Split(cred, "/")
	if len(credParts) != 5 || credParts[4] != "aws4_request" {
		return "", &apiError{Code: "IncompleteSignature", Message: "Credential " + cred + " is malformed; expected KEY/DATE/REGION/SERVICE/aws4_request.", Status: http.StatusBadRequest}
	}
	secretKey, aerr := chk.secretFor(credParts[0])
	if aerr != nil {
		return "", aerr
	}
	if !slices.Contains(chk.regions, credParts[2]) {
		return "", &apiError{Code: "AuthFailure", Message: "Credential should be scoped to a valid region: this cloud serves " + region + ", not '" + credParts[2] + "'.", Status: http.StatusUnauthorized}
	}
	if credParts[3] != service {
		return "", &apiError{Code: "AuthFailure", Message: "Credential should be scoped to the service '" + service + "', not '" + credParts[3] + "'.", Status: http.StatusUnauthorized}
	}
	amzDate := r.Header.Get("X-Amz-Date")
	t, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil {
		return "", &apiError{Code: "AuthFailure", Message: "X-Amz-Date '" + amzDate + "' is missing or not in the form YYYYMMDDTHHMMSSZ.", Status: http.StatusUnauthorized}
	}
	if d := now.Sub(t); d > 15*time.Minute || d < -15*time.Minute {
		return "", &apiError{Code: "RequestExpired", Message: "Request has expired: its date " + amzDate + " is more than 15 minutes from the server's time.", Status: http.StatusBadRequest}
	}
	if !strings.HasPrefix(amzDate, credParts[1]) {
		return "", &apiError{Code: "AuthFailure", Message: "Credential date " + credParts[1] + " does not match X-Amz-Date " + amzDate + ".", Status: http.StatusUnauthorized}
	}
	h := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(h[:])
	if claimed := r.Header.Get("X-Amz-Content-Sha256"); claimed != "" && claimed != payloadHash {
		return "", &apiError{Code: "SignatureDoesNotMatch", Message: "X-Amz-Content-Sha256 does not match the SHA-256 of the request body.", Status: http.StatusForbidden}
	}
	creq := canonicalRequest(r, strings.Split(signed, ";"), payloadHash)
	scope := strings.Join(credParts[1:], "/")
	hreq := sha256.Sum256([]byte(creq))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(hreq[:])
	key := hmacSHA256([]byte("AWS4"+secretKey), credParts[1])
	key = hmacSHA256(key, credParts[2])
	key = hmacSHA256(key, credParts[3])
	key = hmacSHA256(key, "aws4_request")
	want := hex.EncodeToString(hmacSHA256(key, toSign))
	if !hmac.Equal([]byte(want), []byte(sig)) {
		return "", &apiError{Code: "SignatureDoesNotMatch", Message: "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method.", Status: http.StatusForbidden}
	}
	return credParts[0], nil
}

// signedService is the service a request's SigV4 credential scope names ("" when the
// request carries no well-formed Authorization header).
func signedService(r *http.Request) string {
	_, rest, _ := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	cred, _, _ := strings.Cut(rest, ",")
	parts := strings.Split(strings.TrimSpace(cred), "/")
	if len(parts) != 5 {
		return ""
	}
	return parts[3]
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// canonicalRequest builds SigV4's canonical request for r with the given signed headers.
func canonicalRequest(r *http.Request, signed []string, payloadHash string) string {
	var b strings.Builder
	b.WriteString(r.Method + "\n")
	path := r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	b.WriteString(path + "\n")
	b.WriteString(canonicalQuery(r.URL.Query()) + "\n")
	for _, h := range signed {
		var v string
		switch h {
		case "host":
			v = r.Host
		case "content-length":
			v = r.Header.Get("Content-Length")
			if v == "" && r.ContentLength >= 0 {
				v = strconv.FormatInt(r.ContentLength, 10)
			}
		default:
			vals := r.Header.Values(h)
			for i := range vals {
				vals[i] = strings.Join(strings.Fields(vals[i]), " ")
			}
			v = strings.Join(vals, ",")
		}
		b.WriteString(h + ":" + v + "\n")
	}
	b.WriteString("\n" + strings.Join(signed, ";") + "\n" + payloadHash)
	return b.String()
}

func canonicalQuery(q url.Values) string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		vals := append([]string(nil), q[k]...)
		sort.Strings(vals)
		for _, v := range vals {
			parts = append(parts, sigEscape(k)+"="+sigEscape(v))
		}
	}
	return strings.Join(parts, "&")
}

// sigEscape percent-encodes everything but SigV4's unreserved characters.
func sigEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
		} else {
			b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
		}
	}
	return b.String()
}
