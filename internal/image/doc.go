// Package image gives kubelab's real nodes their container images: a local OCI
// distribution registry that every node's containerd uses as the mirror of all
// registries (docker.io, registry.k8s.io and any other), serving images kubelab builds
// from what Debian installs, images imported from archives, and — unless kubelab runs
// offline — any other image, fetched once from the registry it names and cached.
//
// It implements the step "the container runtime pulls the image" of the flow
// "kubectl apply → API server → scheduler → kubelet → the container runtime pulls the
// image and starts the container": when the kubelet asks containerd for a pod sandbox
// or a container, containerd pulls registry.k8s.io/pause:3.10, nginx, postgres:16, …
// from here.
//
// # Names
//
// The registry serves its own images, whatever registry they name, under their
// repository path: a pull of docker.io/library/nginx:latest through the mirror arrives
// as GET /v2/library/nginx/manifests/latest?ns=docker.io, registry.k8s.io/pause:3.10 as
// /v2/pause/manifests/3.10?ns=registry.k8s.io and quay.io/foo/bar:1 as
// /v2/foo/bar/manifests/1?ns=quay.io; for its own images ?ns= is ignored. RepoPath maps
// a reference to that path, normalised as the kubelet and containerd normalise it
// ("nginx" is "library/nginx:latest").
//
// # Images from their registries
//
// A pull through the mirror (one with ?ns=<registry host>) of something the registry
// does not hold is served from the registry host it names, as kind, k3s and minikube
// nodes pull it themselves: kubelab's own images and the imported ones always win, the
// rest comes from upstream.
//
//   - Once, for every node: what is fetched without the pull's own credentials is kept
//     in Dir/upstream (manifests by repository and digest, tags with when upstream last
//     confirmed them, blobs by digest) and served from there to every node and after
//     every restart. Nodes pulling one blob at once share one fetch, each reading it as
//     it arrives. A tag is served from the cache for 5 minutes, then a HEAD asks upstream
//     whether it moved; when upstream cannot be reached the cached one is served.
//   - Credentials: when upstream asks for credentials the pull did not bring, the
//     registry answers with a Basic challenge; containerd then sends the credentials the
//     kubelet gave it in CRI PullImage (from the pod's imagePullSecrets: the kubelet sets
//     no server address, so containerd's CRI hands them to whichever host challenges,
//     the mirror included), and the registry fetches with them. What they fetch is
//     passed through and never cached, so no pod without those credentials reads it.
//     Without the pull's own credentials the registry uses the user's (Config.Keychain:
//     the docker CLI's config.json of the user running kubelab), and caches what they
//     fetch for every pull, as upstream's kubelet uses a node's own credentials for
//     every pod.
//   - Where: the registry runs in kubelab's process, in the machine's network
//     namespace, so upstream is reached as the machine reaches it, through HTTPS_PROXY
//     (NO_PROXY honoured; Config.Proxy). The nodes' containerd never leaves the VPC:
//     their only registry is this one, so pulls need no way out of the nodes' network
//     namespaces, and --offline holds for them whatever else the VPC can reach.
//   - Config.Upstreams names the endpoint of a registry host (tests point docker.io and
//     a private host at registries they run on 127.0.0.1; a user may point docker.io at
//     a mirror); other hosts are reached at their own address over HTTPS. A pull naming
//     this machine (localhost, a loopback or link-local address) is refused unless
//     Upstreams names it: pods reach the registry, and must not reach the machine's own
//     services through it.
//   - Config.Offline (kubelab up --offline) keeps the registry to what it holds and has
//     cached: anything else is not found, with a message naming offline mode, and
//     nothing leaves the machine.
//
// This design over containerd reaching the real registries itself (its hosts.toml
// server as a fallback after the mirror): the nodes then need a way out of the VPC for
// pulls and the proxy settings in each containerd, every node fetches every image again,
// and offline mode depends on the network rather than on one switch.
//
// # Default images
//
// At every start Run builds and pushes, from this machine's files:
//
//	registry.k8s.io/pause:3.10        kubelab-pause (Config.PauseBinary) as /pause
//	docker.io/library/busybox:latest  Debian's busybox-static, every applet in /bin (as upstream's busybox image), Cmd ["sh"]
//	docker.io/library/nginx:latest    Debian's nginx with its shared libraries (from the
//	                                  ELF files), NSS modules, /etc/nginx, busybox as the
//	                                  shell; serves /usr/share/nginx/html on port 80
//	kubelab.dev/kubelab:latest        with Config.KubelabBinary: that binary as
//	                                  /usr/bin/kubelab (the entrypoint), the volume tools
//	                                  of the CSI node plugin (mount, umount, blkid, fsck,
//	                                  mke2fs, e2fsck, resize2fs, mkfs.xfs, xfs_repair,
//	                                  xfs_growfs, xfs_io) with their libraries, busybox
//
// nginx is also tagged with Debian's nginx version (nginx:1.22.1 on Debian 12). Every
// image is linux on this machine's architecture, one gzip layer, every time stamp the
// epoch, so the same files give the same digests. Layers are cached in Dir keyed by
// their inputs (paths, sizes, modification times, generated contents): a start with
// unchanged files builds nothing.
//
// # Imported images
//
// Import (`kubelab image import FILE`) reads a `docker save` tarball or an OCI image
// layout tarball, pushes its images to the running registry and records them in the OCI
// image layout Dir/layout. The registry keeps manifests in memory only, so Run pushes
// the layout's images again at each start. BuildHost (`kubelab image build`) makes an
// image of this machine's files (executables with their shared libraries, directories,
// busybox's applets) and Tag (`kubelab image tag`) serves an image under more names;
// both record what they push in the same layout.
//
// # Contract
//
//	r, err := image.New(image.Config{Dir: dir, PauseBinary: pause})
//	go r.Run(ctx)     // listens, builds, pushes; serves until ctx ends
//	<-r.Ready()       // every default and imported image is served
//	r.Addr()          // "127.0.0.1:PORT"; containerd's mirror configuration points here
//
// Dir holds: addr (the address, one line: the first start picks a free port, later
// starts reuse it, because containerd's configurations hold it; a taken port is an
// error naming it and the file), layout/ (the OCI image layout of imported images,
// whose blobs directory is also the registry's blob store), cache/ (built layers'
// digests by input hash), upstream/ (what was fetched from upstream registries; never
// pruned, removing it while kubelab is stopped only costs fetching again).
package image
