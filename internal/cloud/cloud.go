package cloud

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kubelab/kubelab/internal/cloud/blockdev"
	"github.com/kubelab/kubelab/internal/cloud/loadbalancer"
	"github.com/kubelab/kubelab/internal/util/atomicfile"
)

// Devices is what the cloud needs from the machine's block layer: volume files and the
// loop devices over them. blockdev.Loop is the real one, blockdev.Fake the fake.
type Devices interface {
	CreateFile(path string, size int64) error
	CopyFile(dst, src string, size int64) error
	GrowFile(path string, size int64) error
	RemoveFile(path string) error
	FileExists(path string) bool
	Attach(path string) (string, error)
	Refresh(dev string) error
	Detach(dev string) error
	BackingFile(dev string) string
	List(dir string) map[string]string
}

// Option changes how New builds a Cloud.
type Option func(*Cloud)

// WithDevices replaces the block layer (real mode only); tests pass a *blockdev.Fake.
func WithDevices(d Devices) Option { return func(c *Cloud) { c.dev = d } }

// WithClock replaces time.Now (for SigV4 date checks and timestamps).
func WithClock(now func() time.Time) Option { return func(c *Cloud) { c.now = now } }

// Cloud is the EC2/EBS-compatible cloud. Build it with New and serve it with Run.
type Cloud struct {
	cfg Config
	log *slog.Logger
	lat Latencies
	dev Devices // nil in hollow mode
	now func() time.Time

	store                         *store
	accessKey, secretKey, ownerID string

	mu         sync.Mutex
	volumes    map[string]*Volume
	instances  map[string]*Instance
	snapshots  map[string]*Snapshot
	mods       map[string]*Modification
	tokens     map[string]tokenRecord
	faults     []*Fault
	parked     []parkedTransition
	timers     map[*time.Timer]struct{}
	closed     bool
	imds       map[string]*imdsServer
	imdsTokens map[string]imdsToken
	vpc        *VPC
	subnets    map[string]*Subnet
	enis       map[string]*NetworkInterface
	lbs        map[string]*LoadBalancer // by ARN
	tgs        map[string]*TargetGroup
	listeners  map[string]*Listener
	rules      map[string]*Rule
	// IAM and STS: OIDC providers and managed policies by ARN, roles and instance
	// profiles by lower-case name (IAM's names are unique without regard to case),
	// sessions by access key id.
	oidcProviders map[string]*OIDCProvider
	roles         map[string]*Role
	policies      map[string]*ManagedPolicy
	profiles      map[string]*InstanceProfile
	sessions      map[string]*Session
	// lbBlock is the block of loopback addresses load balancers get theirs from.
	lbBlock netip.Prefix
	// plane runs the load balancers; nil until Run starts it.
	plane *loadbalancer.Plane
	// usedTGs are the target groups the plane ran at the last sync.
	usedTGs map[string]bool
	// planeErr is the last sync's failure to bind listeners (retried).
	planeErr error

	wg       sync.WaitGroup // transitions and background copies
	bgCtx    context.Context
	bgCancel context.CancelFunc

	endpoint string
	ready    chan struct{}
	done     chan struct{}
	started  bool
}

// New validates cfg, opens the state in cfg.DataDir and loads it. Run serves it.
func New(cfg Config, opts ...Option) (*Cloud, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Cloud{
		cfg: cfg, log: cfg.Logger, lat: profiles[cfg.Profile], now: time.Now,
		volumes: map[string]*Volume{}, instances: map[string]*Instance{}, snapshots: map[string]*Snapshot{},
		mods: map[string]*Modification{}, tokens: map[string]tokenRecord{}, timers: map[*time.Timer]struct{}{},
		imds: map[string]*imdsServer{}, subnets: map[string]*Subnet{}, enis: map[string]*NetworkInterface{},
		lbs: map[string]*LoadBalancer{}, tgs: map[string]*TargetGroup{}, listeners: map[string]*Listener{}, rules: map[string]*Rule{},
		oidcProviders: map[string]*OIDCProvider{}, roles: map[string]*Role{}, policies: map[string]*ManagedPolicy{},
		profiles: map[string]*InstanceProfile{}, sessions: map[string]*Session{},
		ready: make(chan struct{}), done: make(chan struct{}),
	}
	for _, o := range opts {
		o(c)
	}
	if cfg.Hollow {
		c.dev = nil
	} else if c.dev == nil {
		if os.Geteuid() != 0 {
			return nil, errors.New("real mode needs root for loop devices; run as root or use hollow mode")
		}
		c.dev = blockdev.Loop{}
	}
	for _, d := range []string{cfg.DataDir, c.volumesDir(), c.snapshotsDir(), filepath.Join(cfg.DataDir, "instances")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	st, err := openStore(filepath.Join(cfg.DataDir, "state.db"))
	if err != nil {
		return nil, err
	}
	c.store = st
	if err := c.load(); err != nil {
		st.close()
		return nil, err
	}
	c.bgCtx, c.bgCancel = context.WithCancel(context.Background())
	return c, nil
}

func (c *Cloud) volumesDir() string   { return filepath.Join(c.cfg.DataDir, "volumes") }
func (c *Cloud) snapshotsDir() string { return filepath.Join(c.cfg.DataDir, "snapshots") }
func (c *Cloud) volumeFile(id string) string {
	return filepath.Join(c.volumesDir(), id+".img")
}
func (c *Cloud) snapshotFile(id string) string {
	return filepath.Join(c.snapshotsDir(), id+".img")
}

// load reads the state and the credentials (making them at first start).
func (c *Cloud) load() error {
	if err := loadAll(c.store, bucketVolumes, func(v *Volume) { c.volumes[v.ID] = v }); err != nil {
		return err
	}
	if err := loadAll(c.store, bucketInstances, func(i *Instance) { c.instances[i.ID] = i }); err != nil {
		return err
	}
	if err := loadAll(c.store, bucketSnapshots, func(s *Snapshot) { c.snapshots[s.ID] = s }); err != nil {
		return err
	}
	if err := loadAll(c.store, bucketVPCs, func(v *VPC) { c.vpc = v }); err != nil {
		return err
	}
	if err := loadAll(c.store, bucketSubnets, func(s *Subnet) { c.subnets[s.ID] = s }); err != nil {
		return err
	}
	if err := c.ensureNetworkLocked(); err != nil {
		return fmt.Errorf("make the default vpc: %w", err)
	}
	if err := c.store.ensureBucket(bucketNetworkInterfaces); err != nil {
		return err
	}
	if err := loadAll(c.store, bucketNetworkInterfaces, func(n *NetworkInterface) { c.enis[n.ID] = n }); err != nil {
		return err
	}
	if err := c.migrateENIsLocked(); err != nil {
		return fmt.Errorf("make the instances' primary network interfaces: %w", err)
	}
	if err := loadAll(c.store, bucketLoadBalancers, func(lb *LoadBalancer) { c.lbs[lb.ARN] = lb }); err != nil {
		return err
	}
	if err := loadAll(c.store, bucketTargetGroups, func(tg *TargetGroup) { c.tgs[tg.ARN] = tg }); err != nil {
		return err
	}
	if err := loadAll(c.store, bucketListeners, func(l *Listener) { c.listeners[l.ARN] = l }); err != nil {
		return err
	}
	if err := loadAll(c.store, bucketRules, func(r *Rule) { c.rules[r.ARN] = r }); err != nil {
		return err
	}
	if err := loadAll(c.store, bucketOIDCProviders, func(o *OIDCProvider) { c.oidcProviders[o.ARN] = o }); err != nil {
		return err
	}
	if err := loadAll(c.store, bucketRoles, func(r *Role) { c.roles[strings.ToLower(r.Name)] = r }); err != nil {
		return err
	}
	if err := loadAll(c.store, bucketPolicies, func(p *ManagedPolicy) { c.policies[p.ARN] = p }); err != nil {
		return err
	}
	if err := loadAll(c.store, bucketProfiles, func(p *InstanceProfile) { c.profiles[strings.ToLower(p.Name)] = p }); err != nil {
		return err
	}
	if err := loadAll(c.store, bucketSessions, func(s *Session) { c.sessions[s.AccessKeyID] = s }); err != nil {
		return err
	}
	if err := loadAll(c.store, bucketModifications, func(m *Modification) { c.mods[m.VolumeID] = m }); err != nil {
		return err
	}
	type tok struct {
		Token string `json:"token"`
		tokenRecord
	}
	if err := loadAll(c.store, bucketTokens, func(t *tok) { c.tokens[t.Token] = t.tokenRecord }); err != nil {
		return err
	}
	var err error
	if c.accessKey, err = c.store.meta("accessKey"); err != nil {
		return fmt.Errorf("read credentials: %w", err)
	}
	c.secretKey, _ = c.store.meta("secretKey")
	c.ownerID, _ = c.store.meta("ownerId")
	if c.accessKey == "" || c.secretKey == "" || c.ownerID == "" {
		c.accessKey = "AKIA" + randomString("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
		sk := make([]byte, 30)
		rand.Read(sk)
		c.secretKey = base64.StdEncoding.EncodeToString(sk)
		c.ownerID = randomString("0123456789", 12)
		if err := c.store.setMeta(map[string]string{"accessKey": c.accessKey, "secretKey": c.secretKey, "ownerId": c.ownerID}); err != nil {
			return fmt.Errorf("save credentials: %w", err)
		}
	}
	return c.loadLBBlock()
}

func randomString(alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		k, _ := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		b[i] = alphabet[k.Int64()]
	}
	return string(b)
}

// Ready is closed once Run serves the API and has written the endpoint file.
func (c *Cloud) Ready() <-chan struct{} { return c.ready }

// Done is closed when Run has returned and released what it holds.
func (c *Cloud) Done() <-chan struct{} { return c.done }

// Endpoint is the API's URL ("http://127.0.0.1:PORT"); valid once Ready is closed.
func (c *Cloud) Endpoint() string { return c.endpoint }

// Region is the region served.
func (c *Cloud) Region() string { return c.cfg.Region }

// Credentials returns the access key id and secret access key requests must be signed with.
func (c *Cloud) Credentials() (accessKeyID, secretAccessKey string) { return c.accessKey, c.secretKey }

// ConfigFile is the path of the AWS config file (for AWS_CONFIG_FILE).
func (c *Cloud) ConfigFile() string { return filepath.Join(c.cfg.DataDir, "aws-config") }

// CredentialsFile is the path of the AWS shared credentials file (for AWS_SHARED_CREDENTIALS_FILE).
func (c *Cloud) CredentialsFile() string { return filepath.Join(c.cfg.DataDir, "aws-credentials") }

// EndpointFile is the path of the file that holds the endpoint URL.
func (c *Cloud) EndpointFile() string { return filepath.Join(c.cfg.DataDir, "endpoint") }

// APIHandler serves the EC2 API as Run's listener does (without the fault injection
// endpoints), for a listener the caller makes elsewhere: the VPC endpoint of a cluster.
func (c *Cloud) APIHandler() http.Handler { return http.HandlerFunc(c.serveAPI) }

// Run reconciles the state with the machine, serves the API (and the instances' IMDS)
// until ctx ends, then stops. It may be called once.
func (c *Cloud) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return errors.New("run: already started")
	}
	c.started = true
	c.mu.Unlock()
	defer close(c.done)
	defer c.store.close()

	if err := c.reconcile(); err != nil {
		c.stop()
		return fmt.Errorf("reconcile: %w", err)
	}
	ln, err := c.listenAPI()
	if err != nil {
		c.stop()
		return err
	}
	c.endpoint = "http://" + ln.Addr().String()
	if err := c.writeClientFiles(); err != nil {
		ln.Close()
		c.stop()
		return err
	}
	c.mu.Lock()
	for _, inst := range c.instances {
		if inst.State == "running" || inst.State == "pending" {
			c.startIMDSLocked(inst)
		}
	}
	c.startPlaneLocked()
	c.syncAllFabricLocked()
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.retryPlane(c.bgCtx)
	}()

	mux := http.NewServeMux()
	mux.Handle("/_kubelab/faults", c.adminOnly(c.serveFaults))
	mux.Handle("/_kubelab/faults/", c.adminOnly(c.serveFaults))
	mux.Handle("/", http.HandlerFunc(c.serveAPI))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	c.log.Info("cloud serving", "endpoint", c.endpoint, "region", c.cfg.Region, "zones", c.cfg.Zones,
		"hollow", c.cfg.Hollow, "profile", c.cfg.Profile, "dataDir", c.cfg.DataDir)
	close(c.ready)

	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	c.stop()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// stop ends transitions, background copies and IMDS listeners, and releases devices when
// configured to.
func (c *Cloud) stop() {
	c.mu.Lock()
	c.closed = true
	for t := range c.timers {
		if t.Stop() {
			c.wg.Done()
		}
	}
	c.timers = map[*time.Timer]struct{}{}
	for id, s := range c.imds {
		s.close()
		delete(c.imds, id)
	}
	plane := c.plane
	c.mu.Unlock()
	c.bgCancel()
	c.wg.Wait()
	if plane != nil {
		// Without c.mu: the health checks it waits for report to the cloud under it.
		plane.Close()
		c.removeHostsEntries()
	}
	if c.cfg.ReleaseOnExit && c.dev != nil {
		c.mu.Lock()
		c.releaseAllLocked()
		c.mu.Unlock()
	}
}

// writeClientFiles writes endpoint, aws-config and aws-credentials into the data dir.
func (c *Cloud) writeClientFiles() error {
	files := map[string]string{
		c.EndpointFile():    c.endpoint + "\n",
		c.ConfigFile():      fmt.Sprintf("[default]\nregion = %s\n", c.cfg.Region),
		c.CredentialsFile(): fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", c.accessKey, c.secretKey),
	}
	for path, content := range files {
		if err := atomicfile.WriteFile(path, []byte(content), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// parkedTransition is a transition held back by a "hang" fault.
type parkedTransition struct {
	action, volumeID, instanceID string
	tags                         []Tag
	fn                           func()
	faultID                      string
}

// after runs fn with c.mu held once d has passed, unless the cloud stops first. A
// matching "slow" fault adds its delay; a matching "hang" fault parks fn until the fault
// is cleared. With no delay and no fault, fn runs at once, before after returns (so that
// the fast profile's transitions are done when the call that started them answers).
// Callers hold c.mu.
func (c *Cloud) after(d time.Duration, action, volumeID, instanceID string, tags []Tag, fn func()) {
	if c.closed {
		return
	}
	if f := c.matchFaultLocked(action, volumeID, instanceID, tags, "slow"); f != nil {
		d += f.delay
	}
	run := func() {
		if c.closed {
			return
		}
		if f := c.matchFaultLocked(action, volumeID, instanceID, tags, "hang"); f != nil {
			c.log.Info("transition held by fault", "fault", f.ID, "action", action, "volume", volumeID, "instance", instanceID)
			c.parked = append(c.parked, parkedTransition{action, volumeID, instanceID, tags, fn, f.ID})
			return
		}
		fn()
	}
	if d <= 0 {
		run()
		return
	}
	c.wg.Add(1)
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		defer c.wg.Done()
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.timers, t)
		run()
	})
	c.timers[t] = struct{}{}
}

// unparkLocked runs the parked transitions whose "hang" fault is gone.
func (c *Cloud) unparkLocked() {
	live := map[string]bool{}
	for _, f := range c.faults {
		live[f.ID] = true
	}
	var run []parkedTransition
	keep := c.parked[:0:0]
	for _, p := range c.parked {
		if live[p.faultID] {
			keep = append(keep, p)
		} else {
			run = append(run, p)
		}
	}
	c.parked = keep
	for _, p := range run {
		c.after(0, p.action, p.volumeID, p.instanceID, p.tags, p.fn)
	}
}

// persist writes changes to the store; on failure the caller must not change memory.
func (c *Cloud) persist(changes ...change) *apiError {
	if err := c.store.apply(changes...); err != nil {
		c.log.Error("persist state", "err", err)
		return errInternal(err)
	}
	return nil
}

func (c *Cloud) devDirOf(inst *Instance) string {
	if inst.DeviceDir != "" {
		return inst.DeviceDir
	}
	return filepath.Join(c.cfg.DataDir, "instances", inst.ID, "dev")
}
