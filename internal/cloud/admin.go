package cloud

import (
	"bytes"
	"io"
	"net/http"
)

// maxAdminBody is the largest request body the admin endpoints read.
const maxAdminBody = 1 << 16

// adminOnly guards the admin endpoints (/_kubelab/...): a request must carry a valid
// Signature Version 4 made with the cloud's own key pair, the one in aws-credentials
// that every EC2 request is signed with (service "ec2", the cloud's region). An
// anonymous request is refused with 401, a badly signed one with 401 or 403, before h
// sees it, with a JSON error like the endpoints' own: {"code": …, "error": …}.
func (c *Cloud) adminOnly(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxAdminBody+1))
		if err != nil {
			writeAdminError(w, errf("InvalidRequest", "read request body: %v", err))
			return
		}
		if len(body) > maxAdminBody {
			writeAdminError(w, &apiError{Code: "InvalidRequest", Message: "The request body is larger than 64 KiB.", Status: http.StatusRequestEntityTooLarge})
			return
		}
		if _, aerr := verifySigV4(r, body, sigv4Check{staticKey(c.accessKey, c.secretKey), []string{c.cfg.Region}, "ec2", c.now()}); aerr != nil {
			c.log.Info("rejected admin request", "path", r.URL.Path, "method", r.Method, "code", aerr.Code, "remote", r.RemoteAddr)
			writeAdminError(w, aerr)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h(w, r)
	})
}

// writeAdminError answers an admin request with e as JSON.
func writeAdminError(w http.ResponseWriter, e *apiError) {
	status := e.Status
	if status == 0 {
		status = http.StatusBadRequest
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, `{"code":`+jsonString(e.Code)+`,"error":`+jsonString(e.Code+": "+e.Message)+"}\n")
}
