package cloud

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kubelab/kubelab/internal/util/atomicfile"
)

// imdsServer is one instance's IMDS listener on a loopback port.
type imdsServer struct {
	srv *http.Server
	url string
}

func (s *imdsServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s.srv.Shutdown(ctx)
}

type imdsToken struct {
	instanceID string
	expires    time.Time
}

// IMDSHandler serves the instance metadata service of one instance, as it answers at
// 169.254.169.254 on EC2: IMDSv1 (unless the instance requires tokens) and IMDSv2.
func (c *Cloud) IMDSHandler(instanceID string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { c.serveIMDS(instanceID, w, r) })
}

// IMDSEndpoint is the URL of an instance's IMDS listener ("" when it has none).
func (c *Cloud) IMDSEndpoint(instanceID string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.imds[instanceID]; s != nil {
		return s.url
	}
	return ""
}

// IMDSEndpointFile is where the cloud writes the URL of instance id's metadata service
// (a node reads it as it would reach 169.254.169.254).
func (c *Cloud) IMDSEndpointFile(id string) string { return c.imdsEndpointFile(id) }

func (c *Cloud) imdsEndpointFile(id string) string {
	return filepath.Join(c.cfg.DataDir, "instances", id, "imds-endpoint")
}

// startIMDSLocked starts an instance's IMDS listener (on its previous port when free)
// and writes its URL to instances/<id>/imds-endpoint.
func (c *Cloud) startIMDSLocked(inst *Instance) {
	if c.cfg.NoIMDSListeners || c.closed || c.imds[inst.ID] != nil {
		return
	}
	var ln net.Listener
	var err error
	if inst.IMDSPort != 0 {
		ln, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(inst.IMDSPort))
	}
	if ln == nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			c.log.Error("imds listen", "instance", inst.ID, "err", err)
			return
		}
	}
	s := &imdsServer{srv: &http.Server{Handler: c.IMDSHandler(inst.ID), ReadHeaderTimeout: 10 * time.Second}, url: "http://" + ln.Addr().String()}
	go s.srv.Serve(ln)
	c.imds[inst.ID] = s
	if port := ln.Addr().(*net.TCPAddr).Port; port != inst.IMDSPort {
		ni := inst.clone()
		ni.IMDSPort = port
		if c.persist(put(bucketInstances, ni.ID, ni)) == nil {
			c.instances[ni.ID] = ni
		}
	}
	os.MkdirAll(filepath.Dir(c.imdsEndpointFile(inst.ID)), 0o755)
	if err := atomicfile.WriteFile(c.imdsEndpointFile(inst.ID), []byte(s.url+"\n"), 0o644); err != nil {
		c.log.Error("write imds endpoint", "instance", inst.ID, "err", err)
	}
}

func (c *Cloud) stopIMDSLocked(id string) {
	if s := c.imds[id]; s != nil {
		go s.close()
		delete(c.imds, id)
		os.Remove(c.imdsEndpointFile(id))
	}
}

func (c *Cloud) serveIMDS(instanceID string, w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Server", "EC2ws")
	if r.URL.Path == "/latest/api/token" {
		c.serveIMDSToken(instanceID, w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	c.mu.Lock()
	inst := c.instances[instanceID]
	if inst == nil || inst.State == "terminated" {
		c.mu.Unlock()
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	inst = inst.clone()
	var tokenOK bool
	tok := r.Header.Get("X-Aws-Ec2-Metadata-Token")
	if tok != "" {
		t, ok := c.imdsTokens[tok]
		tokenOK = ok && t.instanceID == instanceID && c.now().Before(t.expires)
	}
	tree := c.imdsTreeLocked(inst)
	c.mu.Unlock()
	if tok != "" && !tokenOK || tok == "" && inst.HTTPTokens == "required" {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	if v, ok := tree[path]; ok {
		if strings.HasSuffix(path, "/document") {
			w.Header().Set("Content-Type", "application/json")
		} else {
			w.Header().Set("Content-Type", "text/plain")
		}
		fmt.Fprint(w, v)
		return
	}
	if children := imdsChildren(tree, path); len(children) > 0 {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, strings.Join(children, "\n"))
		return
	}
	http.Error(w, "Not Found", http.StatusNotFound)
}

func (c *Cloud) serveIMDSToken(instanceID string, w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut {
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.Header.Get("X-Forwarded-For") != "" {
		http.Error(w, "Forbidden", http.StatusForbidden)
		return
	}
	ttlStr := r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds")
	ttl, err := strconv.Atoi(ttlStr)
	if err != nil || ttl < 1 || ttl > 21600 {
		http.Error(w, "Bad Request", http.StatusBadRequest)
		return
	}
	b := make([]byte, 42)
	rand.Read(b)
	tok := base64.RawURLEncoding.EncodeToString(b)
	c.mu.Lock()
	inst := c.instances[instanceID]
	if inst == nil || inst.State == "terminated" {
		c.mu.Unlock()
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	if c.imdsTokens == nil {
		c.imdsTokens = map[string]imdsToken{}
	}
	now := c.now()
	for k, t := range c.imdsTokens {
		if now.After(t.expires) {
			delete(c.imdsTokens, k)
		}
	}
	c.imdsTokens[tok] = imdsToken{instanceID: instanceID, expires: now.Add(time.Duration(ttl) * time.Second)}
	ttlLeft := inst.hopLimit() - clientHops(r, inst.PrivateIP)
	c.mu.Unlock()
	if writeWithHopLimit(w, ttlLeft, ttlStr, tok) {
		return
	}
	w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", ttlStr)
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprint(w, tok)
}

// identityDocument is /latest/dynamic/instance-identity/document.
type identityDocument struct {
	AccountID               string    `json:"accountId"`
	Architecture            string    `json:"architecture"`
	AvailabilityZone        string    `json:"availabilityZone"`
	BillingProducts         []string  `json:"billingProducts"`
	DevpayProductCodes      []string  `json:"devpayProductCodes"`
	MarketplaceProductCodes []string  `json:"marketplaceProductCodes"`
	ImageID                 string    `json:"imageId"`
	InstanceID              string    `json:"instanceId"`
	InstanceType            string    `json:"instanceType"`
	KernelID                *string   `json:"kernelId"`
	PendingTime             time.Time `json:"pendingTime"`
	PrivateIP               string    `json:"privateIp"`
	RamdiskID               *string   `json:"ramdiskId"`
	Region                  string    `json:"region"`
	Version                 string    `json:"version"`
}

// imdsTreeLocked is the instance's metadata: every leaf path and its value.
func (c *Cloud) imdsTreeLocked(inst *Instance) map[string]string {
	zi := 0
	for k, z := range c.cfg.Zones {
		if z == inst.Zone {
			zi = k
		}
	}
	doc, _ := json.MarshalIndent(identityDocument{
		AccountID: c.ownerID, Architecture: "x86_64", AvailabilityZone: inst.Zone, ImageID: inst.ImageID,
		InstanceID: inst.ID, InstanceType: inst.Type, PendingTime: inst.LaunchTime.UTC().Truncate(time.Second),
		PrivateIP: inst.PrivateIP, Region: c.cfg.Region, Version: "2017-09-30",
	}, "", "  ")
	host := privateDNS(inst.PrivateIP, c.cfg.Region)
	md := "/latest/meta-data/"
	t := map[string]string{
		"/latest/dynamic/instance-identity/document": string(doc),
		md + "ami-id":                         inst.ImageID,
		md + "ami-launch-index":               "0",
		md + "hostname":                       host,
		md + "local-hostname":                 host,
		md + "instance-id":                    inst.ID,
		md + "instance-type":                  inst.Type,
		md + "instance-life-cycle":            "on-demand",
		md + "local-ipv4":                     inst.PrivateIP,
		md + "mac":                            inst.MAC,
		md + "reservation-id":                 inst.ReservationID,
		md + "security-groups":                "default",
		md + "placement/availability-zone":    inst.Zone,
		md + "placement/availability-zone-id": zoneID(c.cfg.Region, zi),
		md + "placement/region":               c.cfg.Region,
		md + "services/domain":                "amazonaws.com",
		md + "services/partition":             "aws",
		md + "block-device-mapping/ami":       "/dev/xvda",
		md + "block-device-mapping/root":      "/dev/xvda",
	}
	// Each attached network interface, under its MAC, as the VPC CNI's IP address
	// manager reads them.
	for _, n := range c.interfacesOfLocked(inst.ID) {
		if n.Attachment.State != "attached" || len(n.PrivateIPs) == 0 {
			continue
		}
		mac := md + "network/interfaces/macs/" + n.MAC + "/"
		t[mac+"device-number"] = strconv.Itoa(n.Attachment.DeviceIndex)
		t[mac+"network-card"] = "0"
		t[mac+"interface-id"] = n.ID
		t[mac+"local-hostname"] = privateDNS(n.PrivateIPs[0], c.cfg.Region)
		t[mac+"local-ipv4s"] = strings.Join(n.PrivateIPs, "\n")
		t[mac+"mac"] = n.MAC
		t[mac+"owner-id"] = c.ownerID
		t[mac+"security-group-ids"] = strings.Join(n.Groups, "\n")
		t[mac+"subnet-id"] = n.SubnetID
		if s := c.subnets[n.SubnetID]; s != nil {
			t[mac+"subnet-ipv4-cidr-block"] = s.CIDR
			t[mac+"vpc-id"] = s.VPCID
		}
		t[mac+"vpc-ipv4-cidr-block"] = vpcCIDR
		t[mac+"vpc-ipv4-cidr-blocks"] = vpcCIDR
	}
	n := 0
	for _, v := range sortedVolumes(c.volumes) {
		if a := v.attachment(inst.ID); a != nil && a.State == "attached" {
			n++
			t[md+"block-device-mapping/ebs"+strconv.Itoa(n)] = linkName(a.Device)
		}
	}
	c.imdsIAMLocked(inst, t)
	out := make(map[string]string, len(t))
	for k, v := range t {
		out[strings.TrimSuffix(k, "/")] = v
	}
	return out
}

// imdsChildren lists the entries under dir ("name" for leaves, "name/" for dirs).
func imdsChildren(tree map[string]string, dir string) []string {
	prefix := dir + "/"
	set := map[string]bool{}
	for p := range tree {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		if head, _, deeper := strings.Cut(rest, "/"); deeper {
			set[head+"/"] = true
		} else {
			set[rest] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
