package cloud

import (
	"crypto/sha256"
	"embed"
	"encoding/base32"
	"path"
	"strings"
	"time"
)

// OIDCProvider is an IAM OpenID Connect identity provider: an issuer whose tokens STS
// accepts for AssumeRoleWithWebIdentity.
type OIDCProvider struct {
	ARN string `json:"arn"`
	// URL is the issuer's URL without its https:// scheme, as IAM keeps it.
	URL         string    `json:"url"`
	ClientIDs   []string  `json:"clientIds"`
	Thumbprints []string  `json:"thumbprints"`
	CreateDate  time.Time `json:"createDate"`
	Tags        []Tag     `json:"tags,omitempty"`
}

// Role is an IAM role: its trust policy and the permissions its sessions have.
type Role struct {
	Name               string    `json:"name"`
	ID                 string    `json:"id"`
	ARN                string    `json:"arn"`
	Path               string    `json:"path"`
	TrustPolicy        string    `json:"trustPolicy"`
	Description        string    `json:"description,omitempty"`
	MaxSessionDuration int       `json:"maxSessionDuration"`
	CreateDate         time.Time `json:"createDate"`
	Tags               []Tag     `json:"tags,omitempty"`
	// Inline are the role's inline policies by name.
	Inline map[string]string `json:"inline,omitempty"`
	// Attached are the ARNs of the managed policies attached to the role, in order.
	Attached []string `json:"attached,omitempty"`
}

func (r *Role) clone() *Role {
	n := *r
	n.Tags = append([]Tag(nil), r.Tags...)
	n.Attached = append([]string(nil), r.Attached...)
	n.Inline = make(map[string]string, len(r.Inline))
	for k, v := range r.Inline {
		n.Inline[k] = v
	}
	return &n
}

// ManagedPolicy is a customer managed policy (IAM keeps versions; this cloud keeps the
// one, v1, that CreatePolicy makes).
type ManagedPolicy struct {
	Name        string    `json:"name"`
	ID          string    `json:"id"`
	ARN         string    `json:"arn"`
	Path        string    `json:"path"`
	Description string    `json:"description,omitempty"`
	Document    string    `json:"document"`
	CreateDate  time.Time `json:"createDate"`
	Tags        []Tag     `json:"tags,omitempty"`
}

// InstanceProfile holds the role an instance's IMDS hands out credentials of.
type InstanceProfile struct {
	Name       string    `json:"name"`
	ID         string    `json:"id"`
	ARN        string    `json:"arn"`
	Path       string    `json:"path"`
	Roles      []string  `json:"roles,omitempty"` // role names (IAM allows one)
	CreateDate time.Time `json:"createDate"`
}

// Session is a set of temporary credentials STS issued for a role.
type Session struct {
	AccessKeyID     string    `json:"accessKeyId"`
	SecretAccessKey string    `json:"secretAccessKey"`
	Token           string    `json:"token"`
	Expiration      time.Time `json:"expiration"`
	RoleARN         string    `json:"roleArn"`
	RoleName        string    `json:"roleName"`
	RoleID          string    `json:"roleId"`
	SessionName     string    `json:"sessionName"`
	// InstanceID is the instance whose profile the session is for ("" for web identity).
	InstanceID string    `json:"instanceId,omitempty"`
	Issued     time.Time `json:"issued"`
}

// ARN is the assumed-role ARN the session acts as.
func (s *Session) ARN(account string) string {
	return "arn:aws:sts::" + account + ":assumed-role/" + s.RoleName + "/" + s.SessionName
}

//go:embed managedpolicies/*.json
var managedPolicyFiles embed.FS

// awsManagedPolicies are the AWS managed policies IAM knows, by ARN: their documents
// as AWS publishes them.
var awsManagedPolicies = func() map[string]*ManagedPolicy {
	paths := map[string]string{
		"AmazonEBSCSIDriverPolicy":           "/service-role/",
		"AdministratorAccess":                "/",
		"AmazonEKSWorkerNodePolicy":          "/",
		"AmazonEKS_CNI_Policy":               "/",
		"AmazonEC2ContainerRegistryReadOnly": "/",
	}
	out := map[string]*ManagedPolicy{}
	for name, p := range paths {
		data, err := managedPolicyFiles.ReadFile(path.Join("managedpolicies", name+".json"))
		if err != nil {
			panic(err)
		}
		arn := "arn:aws:iam::aws:policy" + p + name
		sum := sha256.Sum256([]byte(arn))
		id := "ANPA" + strings.ToUpper(base32.StdEncoding.EncodeToString(sum[:]))[:17]
		out[arn] = &ManagedPolicy{Name: name, ID: id, ARN: arn, Path: p,
			Document: string(data), CreateDate: time.Date(2022, 4, 4, 17, 24, 0, 0, time.UTC)}
	}
	return out
}()

// iamID is a new IAM unique id: prefix (AROA for roles, ANPA for policies, AIPA for
// instance profiles, ASIA for temporary access keys) and 17 characters.
func iamID(prefix string) string {
	return prefix + randomString("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 17)
}
