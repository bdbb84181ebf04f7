package image

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"regexp"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The images kubelab builds at every start and serves under these references (and,
// for nginx, the tag of Debian's nginx version too).
const (
	// PauseImage is the pod sandbox image: kubelab-pause as /pause.
	PauseImage = "registry.k8s.io/pause:3.10"
	// BusyboxImage is Debian's busybox-static with its applets and Cmd ["sh"].
	BusyboxImage = "docker.io/library/busybox:latest"
	// NginxImage is Debian's nginx with its libraries, serving /usr/share/nginx/html on
	// port 80, with busybox as its shell.
	NginxImage = "docker.io/library/nginx:latest"
	// KubelabImage is kubelab's own binary as /usr/bin/kubelab (Entrypoint), with the
	// tools the EBS CSI node plugin runs (util-linux's mount, umount, blkid and fsck,
	// e2fsprogs, xfsprogs) and their libraries, and busybox as the shell: the image of the
	// CSI add-on's containers. Built only when Config.KubelabBinary is set.
	KubelabImage = "kubelab.dev/kubelab:latest"
)

// Host files the images are built from (Debian 12 packages busybox-static and nginx).
var (
	hostBusybox   = "/bin/busybox"
	hostNginx     = "/usr/sbin/nginx"
	hostNginxConf = "/etc/nginx"
	hostNginxHTML = "/usr/share/nginx/html"
	// nssModules are the NSS libraries glibc loads at run time to resolve users, groups
	// and hosts; nginx needs them to find its user www-data.
	nssModules = []string{"libnss_files.so.2", "libnss_dns.so.2"}
	// hostVolumeTools are the commands the CSI node plugin formats, checks, mounts and
	// grows volumes with (Debian 12 packages util-linux, mount, e2fsprogs, xfsprogs).
	hostVolumeTools = []string{"/usr/bin/mount", "/usr/bin/umount", "/usr/sbin/blkid", "/usr/sbin/fsck",
		"/usr/sbin/mke2fs", "/usr/sbin/mkfs.ext4", "/usr/sbin/mkfs.ext3", "/usr/sbin/e2fsck", "/usr/sbin/fsck.ext4",
		"/usr/sbin/fsck.ext3", "/usr/sbin/resize2fs", "/usr/sbin/mkfs.xfs", "/usr/sbin/xfs_repair", "/usr/sbin/xfs_growfs",
		"/usr/sbin/xfs_io"}
	// hostVolumeScripts are the shell scripts among them (run by busybox's sh).
	hostVolumeScripts = []string{"/usr/sbin/fsck.xfs"}
	hostMke2fsConf    = "/etc/mke2fs.conf"
)

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// builtImage is an image with the references it is served under.
type builtImage struct {
	refs []string
	img  v1.Image
}

// builder makes the default images from host files, through the layer cache.
type builder struct {
	pauseBinary   string
	kubelabBinary string // "": no KubelabImage
	cache         *layerCache
	log           *slog.Logger
}

// build makes the default images: pause, busybox, nginx and, with a kubelab binary,
// kubelab.
func (b *builder) build() ([]builtImage, error) {
	var out []builtImage
	builds := []func() (builtImage, error){b.pause, b.busybox, b.nginx}
	if b.kubelabBinary != "" {
		builds = append(builds, b.kubelab)
	}
	for _, f := range builds {
		img, err := f()
		if err != nil {
			return nil, err
		}
		out = append(out, img)
	}
	return out, nil
}

// image assembles a one-layer linux image of the host's architecture from spec, every
// time stamp the epoch.
func (b *builder) image(ref string, spec *layerSpec, cfg v1.Config) (v1.Image, error) {
	start := time.Now()
	layer, hit, err := b.cache.layer(spec)
	if err != nil {
		return nil, fmt.Errorf("build the layer of %s: %w", ref, err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      v1.Time{Time: epoch},
		Config:       cfg,
		RootFS:       v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "kubelab: " + ref, Comment: "built by kubelab from this machine's files"},
	})
	if err != nil {
		return nil, err
	}
	d, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	b.log.Debug("image built", "image", ref, "digest", d, "cached", hit, "files", len(spec.entries), "duration", time.Since(start))
	return img, nil
}

// pause is PauseImage: the static kubelab-pause at /pause, run as 65535:65535.
func (b *builder) pause() (builtImage, error) {
	spec := newLayerSpec()
	if err := spec.hostFile("pause", b.pauseBinary); err != nil {
		return builtImage{}, fmt.Errorf("pause image: %w", err)
	}
	spec.entries["pause"].mode = 0o755
	img, err := b.image(PauseImage, spec, v1.Config{
		Entrypoint: []string{"/pause"},
		User:       "65535:65535",
	})
	if err != nil {
		return builtImage{}, err
	}
	return builtImage{refs: []string{PauseImage}, img: img}, nil
}

// busybox is BusyboxImage: /bin/busybox with every applet as a hard link in /bin (as
// upstream's busybox image), a root and a nobody user, and /tmp.
func (b *builder) busybox() (builtImage, error) {
	spec := newLayerSpec()
	if err := spec.hostFile("bin/busybox", hostBusybox); err != nil {
		return builtImage{}, fmt.Errorf("busybox image (package busybox-static): %w", err)
	}
	if err := addApplets(spec, "bin/busybox"); err != nil {
		return builtImage{}, err
	}
	baseDirs(spec)
	spec.file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"))
	spec.file("etc/group", 0o644, []byte("root:x:0:\nnobody:x:65534:\n"))
	img, err := b.image(BusyboxImage, spec, v1.Config{
		Cmd: []string{"sh"},
		Env: []string{"PATH=" + defaultPath},
	})
	if err != nil {
		return builtImage{}, err
	}
	return builtImage{refs: []string{BusyboxImage}, img: img}, nil
}

// nginx is NginxImage: Debian's nginx, the libraries it links and the NSS modules
// glibc loads for it, Debian's /etc/nginx with the image's own nginx.conf (the default
// server on port 80 serves /usr/share/nginx/html), logs to stdout and stderr, and
// busybox as /bin/sh with its applets.
func (b *builder) nginx() (builtImage, error) {
	spec := newLayerSpec()
	mergedUsr(spec)
	if _, err := spec.hostPath(hostNginx); err != nil {
		return builtImage{}, fmt.Errorf("nginx image (package nginx): %w", err)
	}
	libs, err := libraryClosure([]string{hostNginx}, nssModules)
	if err != nil {
		return builtImage{}, fmt.Errorf("nginx image: %w", err)
	}
	for _, l := range libs {
		if _, err := spec.hostPath(l); err != nil {
			return builtImage{}, fmt.Errorf("nginx image: %w", err)
		}
	}
	busybox := spec.resolve("bin/busybox")
	if err := spec.hostFile(busybox, hostBusybox); err != nil {
		return builtImage{}, fmt.Errorf("nginx image (package busybox-static): %w", err)
	}
	if err := addApplets(spec, busybox); err != nil {
		return builtImage{}, err
	}
	if err := spec.hostTree(hostNginxConf); err != nil {
		return builtImage{}, fmt.Errorf("nginx image: %w", err)
	}
	spec.file("etc/nginx/nginx.conf", 0o644, []byte(nginxConf))
	spec.file("etc/nginx/conf.d/default.conf", 0o644, []byte(nginxDefaultServer))
	if err := spec.hostTree(hostNginxHTML); err != nil {
		return builtImage{}, fmt.Errorf("nginx image: %w", err)
	}
	if !spec.has("usr/share/nginx/html/50x.html") {
		spec.file("usr/share/nginx/html/50x.html", 0o644, []byte(nginx50x))
	}
	baseDirs(spec)
	spec.file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nwww-data:x:33:33:www-data:/var/www:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"))
	spec.file("etc/group", 0o644, []byte("root:x:0:\nwww-data:x:33:\nnobody:x:65534:\n"))
	spec.file("etc/nsswitch.conf", 0o644, []byte("passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n"))
	spec.dir("var/log/nginx", 0o755)
	spec.symlink("var/log/nginx/access.log", "/dev/stdout")
	spec.symlink("var/log/nginx/error.log", "/dev/stderr")
	spec.dir("var/lib/nginx", 0o755)
	spec.dir("var/www", 0o755)

	refs := []string{NginxImage}
	env := []string{"PATH=" + defaultPath}
	if v := nginxVersion(hostNginx); v != "" {
		refs = append(refs, "docker.io/library/nginx:"+v)
		env = append(env, "NGINX_VERSION="+v)
	}
	img, err := b.image(NginxImage, spec, v1.Config{
		Cmd:          []string{"nginx", "-g", "daemon off;"},
		Env:          env,
		ExposedPorts: map[string]struct{}{"80/tcp": {}},
		StopSignal:   "SIGQUIT",
	})
	if err != nil {
		return builtImage{}, err
	}
	return builtImage{refs: refs, img: img}, nil
}

// kubelab is KubelabImage.
func (b *builder) kubelab() (builtImage, error) {
	spec := newLayerSpec()
	mergedUsr(spec)
	if err := spec.hostFile("usr/bin/kubelab", b.kubelabBinary); err != nil {
		return builtImage{}, fmt.Errorf("kubelab image: %w", err)
	}
	var tools []string
	for _, t := range hostVolumeTools {
		resolved, err := spec.hostPath(t)
		if err != nil {
			return builtImage{}, fmt.Errorf("kubelab image (packages util-linux, mount, e2fsprogs, xfsprogs): %w", err)
		}
		tools = append(tools, resolved)
	}
	libs, err := libraryClosure(append(tools, b.kubelabBinary), nil)
	if err != nil {
		return builtImage{}, fmt.Errorf("kubelab image: %w", err)
	}
	for _, l := range libs {
		if _, err := spec.hostPath(l); err != nil {
			return builtImage{}, fmt.Errorf("kubelab image: %w", err)
		}
	}
	for _, f := range append([]string{hostMke2fsConf}, hostVolumeScripts...) {
		if _, err := spec.hostPath(f); err != nil {
			return builtImage{}, fmt.Errorf("kubelab image (packages e2fsprogs, xfsprogs): %w", err)
		}
	}
	busybox := spec.resolve("bin/busybox")
	if err := spec.hostFile(busybox, hostBusybox); err != nil {
		return builtImage{}, fmt.Errorf("kubelab image (package busybox-static): %w", err)
	}
	if err := addApplets(spec, busybox); err != nil {
		return builtImage{}, err
	}
	baseDirs(spec)
	spec.file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"))
	spec.file("etc/group", 0o644, []byte("root:x:0:\nnobody:x:65534:\n"))
	img, err := b.image(KubelabImage, spec, v1.Config{
		Entrypoint: []string{"/usr/bin/kubelab"},
		Env:        []string{"PATH=" + defaultPath},
	})
	if err != nil {
		return builtImage{}, err
	}
	return builtImage{refs: []string{KubelabImage}, img: img}, nil
}

// mergedUsr adds the links of a merged-usr root (Debian 12): /bin, /sbin, /lib and
// /lib64 into /usr, through which the loader's library paths go.
func mergedUsr(spec *layerSpec) {
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib64"} {
		if target, err := os.Readlink(d); err == nil {
			spec.symlink(d, target)
		}
	}
}

// baseDirs adds the directories every image has.
func baseDirs(spec *layerSpec) {
	spec.dirIfAbsent("etc", 0o755)
	spec.dirIfAbsent("root", 0o700)
	spec.dirIfAbsent("home", 0o755)
	spec.dirIfAbsent("run", 0o755)
	spec.dirIfAbsent("var", 0o755)
	spec.dir("tmp", 0o1777)
}

// addApplets adds busybox's applets as hard links to the busybox at layer path
// busybox, every one in /bin (through the layer's symbolic links) as upstream's busybox
// image has them — /bin/sysctl, /bin/ip — where Debian's busybox would put some in
// /sbin, /usr/bin or /usr/sbin; files the layer already has stay.
func addApplets(spec *layerSpec, busybox string) error {
	out, err := exec.Command(hostBusybox, "--list").Output()
	if err != nil {
		return fmt.Errorf("%s --list: %w", hostBusybox, err)
	}
	for _, name := range strings.Fields(string(out)) {
		p := spec.resolve(path.Join("bin", name))
		if p == "" || p == "." || spec.has(p) {
			continue
		}
		spec.dirIfAbsent(path.Dir(p), 0o755)
		spec.hardlink(p, busybox)
	}
	return nil
}

var nginxVersionRE = regexp.MustCompile(`nginx/([0-9][0-9.]*)`)

// nginxVersion is the version `nginx -v` reports ("1.22.1"), or "" if it does not run.
func nginxVersion(bin string) string {
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "-v")
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	if err := cmd.Run(); err != nil {
		return ""
	}
	if m := nginxVersionRE.FindStringSubmatch(stderr.String()); m != nil {
		return m[1]
	}
	return ""
}

// nginxConf is the image's /etc/nginx/nginx.conf. Debian's compiled-in paths are kept
// (/run/nginx.pid, /var/lib/nginx for temporary files); the logs are links to the
// container's stdout and stderr.
const nginxConf = `# nginx.conf of kubelab's nginx image (Debian's nginx).
user  www-data;
worker_processes  auto;

error_log  /var/log/nginx/error.log notice;
pid        /run/nginx.pid;

events {
    worker_connections  1024;
}

http {
    include       /etc/nginx/mime.types;
    default_type  application/octet-stream;

    log_format  main  '$remote_addr - $remote_user [$time_local] "$request" '
                      '$status $body_bytes_sent "$http_referer" '
                      '"$http_user_agent" "$http_x_forwarded_for"';
    access_log  /var/log/nginx/access.log  main;

    sendfile           on;
    keepalive_timeout  65;

    include /etc/nginx/conf.d/*.conf;
}
`

// nginxDefaultServer is the image's default server: /usr/share/nginx/html on port 80.
const nginxDefaultServer = `server {
    listen       80;
    server_name  localhost;

    location / {
        root   /usr/share/nginx/html;
        index  index.html index.htm;
    }

    error_page   500 502 503 504  /50x.html;
    location = /50x.html {
        root   /usr/share/nginx/html;
    }
}
`

const nginx50x = `<!DOCTYPE html>
<html>
<head><title>Error</title></head>
<body>
<h1>An error occurred.</h1>
<p>Sorry, the page you are looking for is currently unavailable.</p>
</body>
</html>
`
