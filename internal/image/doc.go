// Package image gives kubelab's real nodes their container images without internet:
// a local OCI distribution registry that every node's containerd uses as the mirror of
// all registries (docker.io, registry.k8s.io and any other), serving images kubelab
// builds from what Debian installs and images imported from archives.
//
// It implements the step "the container runtime pulls the image" of the flow
// "kubectl apply → API server → scheduler → kubelet → the container runtime pulls the
// image and starts the container": when the kubelet asks containerd for a pod sandbox
// or a container, containerd pulls registry.k8s.io/pause:3.10, nginx, … from here.
//
// # Names
//
// The registry serves every registry's images under their repository path: a pull of
// docker.io/library/nginx:latest through the mirror arrives as
// GET /v2/library/nginx/manifests/latest (containerd's ?ns=docker.io is ignored),
// registry.k8s.io/pause:3.10 as /v2/pause/manifests/3.10 and quay.io/foo/bar:1 as
// /v2/foo/bar/manifests/1. RepoPath maps a reference to that path, normalised as the
// kubelet and containerd normalise it ("nginx" is "library/nginx:latest").
//
// # Default images
//
// At every start Run builds and pushes, from this machine's files:
//
//	registry.k8s.io/pause:3.10        kubelab-pause (Config.PauseBinary) as /pause
//	docker.io/library/busybox:latest  Debian's busybox-static and its applets, Cmd ["sh"]
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
// digests by input hash).
package image
