package cloud

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// Tag is an EC2 resource tag.
type Tag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Instance is an EC2 instance: a kubelab node's identity in the cloud.
type Instance struct {
	ID            string    `json:"id"`
	ReservationID string    `json:"reservationId"`
	Type          string    `json:"type"`
	Zone          string    `json:"zone"`
	ImageID       string    `json:"imageId"`
	State         string    `json:"state"` // pending, running, stopping, stopped, shutting-down, terminated
	LaunchTime    time.Time `json:"launchTime"`
	Tags          []Tag     `json:"tags,omitempty"`
	DeviceDir     string    `json:"deviceDir"`
	PrivateIP     string    `json:"privateIp"`
	MAC           string    `json:"mac"`
	HTTPTokens    string    `json:"httpTokens"` // optional or required (IMDSv2 only)
	// HopLimit is the IP TTL of IMDS token responses (MetadataOptions.HttpPutResponseHopLimit);
	// 0 in state written before it existed means 1.
	HopLimit int `json:"hopLimit,omitempty"`
	// InstanceProfile is the ARN of the IAM instance profile the instance runs with.
	InstanceProfile string `json:"instanceProfile,omitempty"`
	AttachLimit     int    `json:"attachLimit"`
	IMDSPort        int    `json:"imdsPort,omitempty"`
}

// Attachment is a volume's attachment to an instance.
type Attachment struct {
	InstanceID string    `json:"instanceId"`
	Device     string    `json:"device"`
	State      string    `json:"state"` // attaching, attached, detaching
	AttachTime time.Time `json:"attachTime"`
	// LoopDev is the loop device set up for this attachment (real mode), "" before.
	LoopDev string `json:"loopDev,omitempty"`
}

// Volume is an EBS volume.
type Volume struct {
	ID          string       `json:"id"`
	Zone        string       `json:"zone"`
	Type        string       `json:"type"`
	SizeGiB     int          `json:"sizeGiB"`
	Iops        int          `json:"iops,omitempty"`
	Throughput  int          `json:"throughput,omitempty"`
	Encrypted   bool         `json:"encrypted"`
	KmsKeyID    string       `json:"kmsKeyId,omitempty"`
	MultiAttach bool         `json:"multiAttach"`
	SnapshotID  string       `json:"snapshotId,omitempty"`
	State       string       `json:"state"` // creating, available, in-use, deleting
	CreateTime  time.Time    `json:"createTime"`
	Tags        []Tag        `json:"tags,omitempty"`
	Attachments []Attachment `json:"attachments,omitempty"`
}

// Snapshot is an EBS snapshot.
type Snapshot struct {
	ID          string    `json:"id"`
	VolumeID    string    `json:"volumeId"`
	VolumeSize  int       `json:"volumeSize"`
	State       string    `json:"state"` // pending, completed, error
	Progress    int       `json:"progress"`
	Description string    `json:"description,omitempty"`
	StartTime   time.Time `json:"startTime"`
	Encrypted   bool      `json:"encrypted"`
	Tags        []Tag     `json:"tags,omitempty"`
}

// Modification is the latest modification of a volume.
type Modification struct {
	VolumeID            string    `json:"volumeId"`
	State               string    `json:"state"` // modifying, optimizing, completed, failed
	Progress            int       `json:"progress"`
	StartTime           time.Time `json:"startTime"`
	EndTime             time.Time `json:"endTime,omitzero"`
	TargetSize          int       `json:"targetSize"`
	TargetType          string    `json:"targetType"`
	TargetIops          int       `json:"targetIops,omitempty"`
	TargetThroughput    int       `json:"targetThroughput,omitempty"`
	TargetMultiAttach   bool      `json:"targetMultiAttach"`
	OriginalSize        int       `json:"originalSize"`
	OriginalType        string    `json:"originalType"`
	OriginalIops        int       `json:"originalIops,omitempty"`
	OriginalThroughput  int       `json:"originalThroughput,omitempty"`
	OriginalMultiAttach bool      `json:"originalMultiAttach"`
}

// tokenRecord remembers a ClientToken: the request it came with and what it made.
type tokenRecord struct {
	Action     string `json:"action"`
	Hash       string `json:"hash"`
	ResourceID string `json:"resourceId"` // volume id, or reservation id for RunInstances
}

func newID(prefix string) string {
	b := make([]byte, 9)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)[:17]
}

func (v *Volume) attachment(instanceID string) *Attachment {
	for i := range v.Attachments {
		if v.Attachments[i].InstanceID == instanceID {
			return &v.Attachments[i]
		}
	}
	return nil
}

func (v *Volume) clone() *Volume {
	out := *v
	out.Tags = append([]Tag(nil), v.Tags...)
	out.Attachments = append([]Attachment(nil), v.Attachments...)
	return &out
}

func (i *Instance) clone() *Instance {
	out := *i
	out.Tags = append([]Tag(nil), i.Tags...)
	return &out
}

func (s *Snapshot) clone() *Snapshot {
	out := *s
	out.Tags = append([]Tag(nil), s.Tags...)
	return &out
}

func tagValue(tags []Tag, key string) (string, bool) {
	for _, t := range tags {
		if t.Key == key {
			return t.Value, true
		}
	}
	return "", false
}

// mergeTags sets add over tags (replacing values of existing keys).
func mergeTags(tags, add []Tag) []Tag {
	out := append([]Tag(nil), tags...)
	for _, a := range add {
		found := false
		for i := range out {
			if out[i].Key == a.Key {
				out[i].Value = a.Value
				found = true
			}
		}
		if !found {
			out = append(out, a)
		}
	}
	return out
}

// removeTags drops the keys in del; a del entry with HasValue only drops a matching value.
func removeTags(tags []Tag, del []tagDel) []Tag {
	var out []Tag
	for _, t := range tags {
		drop := false
		for _, d := range del {
			if d.Key == t.Key && (!d.HasValue || d.Value == t.Value) {
				drop = true
			}
		}
		if !drop {
			out = append(out, t)
		}
	}
	return out
}

type tagDel struct {
	Key, Value string
	HasValue   bool
}
