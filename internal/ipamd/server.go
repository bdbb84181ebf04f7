package ipamd

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/kubelab/kubelab/internal/util/ipamdapi"
)

// handler serves the ipamdapi paths.
func (m *Manager) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+ipamdapi.PathAdd, func(w http.ResponseWriter, r *http.Request) {
		var req ipamdapi.AddRequest
		if !decode(w, r, &req) {
			return
		}
		a, err := m.add(r.Context(), req)
		if errors.Is(err, errNoAddress) {
			writeError(w, http.StatusServiceUnavailable, ipamdapi.CodeNoAvailableIP, "add cmd: failed to assign an IP address to container: "+err.Error())
			return
		}
		reply(w, a, err)
	})
	mux.HandleFunc("POST "+ipamdapi.PathDel, func(w http.ResponseWriter, r *http.Request) {
		var req ipamdapi.Attachment
		if !decode(w, r, &req) {
			return
		}
		rel, err := m.del(req)
		reply(w, rel, err)
	})
	mux.HandleFunc("POST "+ipamdapi.PathLookup, func(w http.ResponseWriter, r *http.Request) {
		var req ipamdapi.Attachment
		if !decode(w, r, &req) {
			return
		}
		a, ok := m.lookup(req)
		if !ok {
			writeError(w, http.StatusNotFound, ipamdapi.CodeNotFound, "container "+req.ContainerID+" interface "+req.IfName+" holds no address")
			return
		}
		reply(w, a, nil)
	})
	mux.HandleFunc("POST "+ipamdapi.PathGC, func(w http.ResponseWriter, r *http.Request) {
		var req ipamdapi.GCRequest
		if !decode(w, r, &req) {
			return
		}
		released, err := m.gc(req.Valid)
		reply(w, ipamdapi.GCReply{Released: released}, err)
	})
	return mux
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "BadRequest", "decode request: "+err.Error())
		return false
	}
	return true
}

func reply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(ipamdapi.Error{Code: code, Message: msg})
}

// serve serves h on l until ctx ends.
func serve(ctx context.Context, l net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
