// Package cloud is kubelab's EC2/EBS-compatible cloud: one region, its availability
// zones, a default VPC with a subnet per zone, instances and their elastic network
// interfaces (with the instance types' limits), volumes, attachments, snapshots
// and volume modifications, served over the EC2 Query API (Version 2016-11-15) on
// 127.0.0.1, with an instance metadata service (IMDSv1 and v2) per instance; Elastic
// Load Balancing (v2) load balancers that carry traffic, served over the ELB Query API
// (Version 2015-12-01) on the same endpoint; and IAM and STS there too, whose roles'
// temporary credentials the EC2 and ELB APIs accept and authorize by the roles' policies.
//
// It is the cloud side of the storage flow: the CSI controller plugin creates an EBS
// volume (CreateVolume) and attaches it to the node's EC2 instance (AttachVolume) through
// the EC2 API, and the CSI node plugin learns its own instance id, zone and type from
// IMDS.
//
// # Data path
//
// In real mode (root) a volume is a sparse file DIR/volumes/<vol-id>.img. AttachVolume
// sets up a loop device over it and gives the instance EBS-style names in the instance's
// device directory D:
//
//	D/xvdba                                               -> /dev/loopN
//	D/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol<hex> -> /dev/loopN
//
// D is DIR/instances/<instance-id>/dev unless RunInstances set the tag
// kubelab.dev/device-dir=<absolute path>. DetachVolume removes both links and the loop
// device. ModifyVolume grows the file and refreshes the loop device's capacity.
// CreateSnapshot copies the volume's data (sparse-aware) to DIR/snapshots/<snap-id>.img
// and CreateVolume with a SnapshotId copies it back. In hollow mode (Config.Hollow) the
// API and its states are the same, but there are no files, loop devices or links.
//
// # In-process contract (stable; other packages' tests rely on it)
//
//	c, err := cloud.New(cloud.Config{DataDir: dir})       // Listen defaults to 127.0.0.1:0
//	go c.Run(ctx)                                           // blocks until ctx ends
//	<-c.Ready()                                             // closed once it serves
//	c.Endpoint()                                            // "http://127.0.0.1:PORT"
//	c.ConfigFile(), c.CredentialsFile()                     // for AWS_CONFIG_FILE / AWS_SHARED_CREDENTIALS_FILE
//	c.Credentials()                                         // access key id, secret key
//	c.IMDSHandler(instanceID)                               // http.Handler of one instance's IMDS
//	c.IMDSEndpoint(instanceID)                              // its loopback URL
//	c.InjectFault(f), c.ClearFaults()                       // fault injection
//	c.Done()                                                // closed when Run has returned
//	c.NetworkInterfaces(instanceID)                         // its attached interfaces
//
// Config.Fabric, when set, is told every instance's attached network interfaces and
// their addresses at Run's start (Sync) and on every change (SetInstance), so that a
// data plane (package vpc's Fabric, in a cluster) carries them.
//
// At start it writes into DataDir: endpoint (the URL, one line), aws-config ([default]
// region = …) and aws-credentials ([default] aws_access_key_id / aws_secret_access_key),
// and for each instance instances/<id>/imds-endpoint (the IMDS URL, one line). The
// endpoint is stable: with Listen's port 0 the first start takes a free port, records it
// in state.db, and later starts on the same data dir listen on it again (if another
// process holds it by then, the cloud takes a new free port, logs a warning, rewrites the
// endpoint file and keeps the new port). Each instance's IMDS port is kept the same way.
// The keys are made at first start and kept in state.db; every EC2 request must carry a
// valid Signature Version 4 made with them (service "ec2", the cloud's region).
//
// Run returns when ctx ends. Attached volumes stay attached (their loop devices and links
// stay) so that a restarted cloud finds them again, unless Config.ReleaseOnExit is set, in
// which case Run detaches every loop device and removes every link it made; the next Run
// sets them up again for the volumes that are attached in the API. At start Run reconciles
// the stored state with the machine: it resumes transitions that were under way, brings
// back the loop devices and links of attached volumes, and removes volume files, loop
// devices and links that no volume accounts for.
//
// # Load balancers
//
// A request signed for the service elasticloadbalancing (or, unsigned, naming Version
// 2015-12-01) is an ELB request: load balancers (network, application), target groups,
// targets and their health, listeners, rules, tags and attributes, with ELB's error
// codes in ELB's error form. Each active load balancer listens on an address of its own
// in 127.0.0.0/8 (Linux routes the whole block to the loopback device), taken from a
// block the cloud keeps in state.db (Config.LoadBalancerCIDR, or a /24 of 127.128.0.0/9
// on which nothing listened at the first start); the data plane (package loadbalancer)
// proxies to healthy targets, reached through Config.Dial, and health-checks them; with
// Config.HostsFile the active load balancers' DNS names are kept in a block of that
// hosts file, removed when the cloud stops. Run brings back every load balancer, its
// address, listeners and targets (with their last health) at start.
//
//	c.LoadBalancerBlock()                                   // the addresses' block
//
// # IAM, STS and credentials
//
// Requests signed for the service iam (Version 2010-05-08, scope us-east-1 or the
// cloud's region) are IAM's: OpenID Connect providers, roles with trust policies, inline
// and managed policies (the account's, and AWS managed ones such as
// service-role/AmazonEBSCSIDriverPolicy with the documents AWS publishes), instance
// profiles; kept in state.db. Requests for sts (Version 2011-06-15) are STS's:
// AssumeRoleWithWebIdentity (unsigned, as on AWS) verifies an OIDC token against its
// issuer's discovery document and JWKS, fetched over HTTPS (Config.IssuerDial,
// Config.IssuerRootCAs; a provider's thumbprints name the certificate of the served chain
// it trusts), checks the role's trust policy and issues temporary credentials; and
// GetCallerIdentity. A request signed with the cloud's key pair may do everything; one
// signed with temporary credentials (and their session token) is authorized by the
// role's policies (package iampolicy), action by action with the resource ARNs and
// condition keys of IAM's authorization reference: a refusal is UnauthorizedOperation
// (EC2) or AccessDenied (ELB, IAM). Instances launched with an instance profile get their
// role's credentials from IMDS (iam/security-credentials/<role>).
//
//	cloud.Thumbprint(certDER)                               // for CreateOpenIDConnectProvider's ThumbprintList
//
// # State
//
// All state is in DataDir/state.db (bbolt). One Cloud per data dir: the store is locked.
//
// # Asynchrony
//
// As on EC2, CreateVolume returns "creating", AttachVolume "attaching", DetachVolume
// "detaching", ModifyVolume "modifying" (then "optimizing", "completed") and CreateSnapshot
// "pending"; the transitions complete in the background after the profile's latencies
// (Config.Profile "fast", the default, or "aws" with realistic seconds). In real mode the
// device exists once the attachment is "attached", and is gone once the volume reads
// "available" after a detach.
//
// # Fault injection
//
// POST /_kubelab/faults on the API listener (JSON, see Fault) or Cloud.InjectFault makes
// chosen creates, attaches, detaches, modifications or snapshots fail, hang or slow down,
// by volume or instance; GET lists them, DELETE /_kubelab/faults[/ID] clears them. These
// admin requests, like EC2 requests, must be signed (Signature Version 4, service "ec2",
// the cloud's region) with the cloud's key pair; an anonymous one gets 401, a badly
// signed one 401 or 403, with a JSON error ({"code", "error"}), and changes nothing. The
// listener of APIHandler (a cluster's VPC endpoint) serves no admin endpoint.
package cloud
