package ipamdapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Paths of the API.
const (
	PathAdd    = "/v1/add"
	PathDel    = "/v1/del"
	PathLookup = "/v1/lookup"
	PathGC     = "/v1/gc"
)

// CodeNoAvailableIP is the Error code of an ADD that found no free address and could not
// get one (the node's ENIs and their addresses are at the instance type's limits).
const CodeNoAvailableIP = "NoAvailableIP"

// CodeNotFound is the Error code of a lookup of an attachment that holds no address.
const CodeNotFound = "NotFound"

// Attachment is a pod sandbox's interface: what an address is given to.
type Attachment struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifName"`
}

// AddRequest asks for an address for an attachment.
type AddRequest struct {
	Attachment
	// NetworkName is the CNI network's name.
	NetworkName  string `json:"networkName,omitempty"`
	PodNamespace string `json:"podNamespace,omitempty"`
	PodName      string `json:"podName,omitempty"`
}

// Assignment is the address an attachment holds and where it lives.
type Assignment struct {
	// IP is the pod's address (a secondary private IP of one of the node's ENIs).
	IP string `json:"ip"`
	// ENI is the network interface's id, DeviceNumber its device index (0 the primary).
	ENI          string `json:"eni"`
	DeviceNumber int    `json:"deviceNumber"`
	// RouteTable is the policy-routing table of the ENI (0 for the primary ENI: main).
	RouteTable int `json:"routeTable"`
	// VPCCIDR is the VPC's range.
	VPCCIDR string `json:"vpcCIDR"`
}

// Release says what a DEL released.
type Release struct {
	Found bool `json:"found"`
	Assignment
}

// GCRequest lists the attachments the runtime still has.
type GCRequest struct {
	Valid []Attachment `json:"valid"`
}

// GCReply lists the addresses released.
type GCReply struct {
	Released []string `json:"released"`
}

// Error is the body of a failed request.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// Client calls the API on a unix socket.
type Client struct {
	http *http.Client
}

// NewClient is a client of the server listening on the unix socket at path.
func NewClient(path string, timeout time.Duration) *Client {
	d := &net.Dialer{}
	return &Client{http: &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", path) },
		// One request per process: no idle connection to keep.
		DisableKeepAlives: true,
	}}}
}

// Add asks for an address for req's attachment.
func (c *Client) Add(ctx context.Context, req AddRequest) (*Assignment, error) {
	out := &Assignment{}
	return out, c.call(ctx, PathAdd, req, out)
}

// Del releases a's address.
func (c *Client) Del(ctx context.Context, a Attachment) (*Release, error) {
	out := &Release{}
	return out, c.call(ctx, PathDel, a, out)
}

// Lookup says which address a holds; an *Error of CodeNotFound when none.
func (c *Client) Lookup(ctx context.Context, a Attachment) (*Assignment, error) {
	out := &Assignment{}
	return out, c.call(ctx, PathLookup, a, out)
}

// GC releases the address of every attachment not in valid.
func (c *Client) GC(ctx context.Context, valid []Attachment) (*GCReply, error) {
	out := &GCReply{}
	return out, c.call(ctx, PathGC, GCRequest{Valid: valid}, out)
}

func (c *Client) call(ctx context.Context, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://ipamd"+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("ipamd %s: %w", path, err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	if resp.StatusCode != http.StatusOK {
		e := &Error{}
		if err := dec.Decode(e); err != nil || e.Message == "" {
			return fmt.Errorf("ipamd %s: %s", path, resp.Status)
		}
		return e
	}
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("ipamd %s: decode answer: %w", path, err)
	}
	return nil
}

// IsCode says whether err is an *Error of code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}
