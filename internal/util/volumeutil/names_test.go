package volumeutil

import "testing"

// The names are upstream's: a VolumeAttachment name is csi- and the hex sha256 of
// handle, driver and node; a unique volume name joins driver and handle with ^.
func TestNames(t *testing.T) {
	const want = "csi-7ba6b8ed285c3c863d675c3b4567d68ede4307ae1a37202e02bf2c4b9f42f28b"
	if got := AttachmentName("vol-1", "ebs.csi.aws.com", "node-a"); got != want {
		t.Errorf("AttachmentName = %q, want %q", got, want)
	}
	if u := UniqueVolumeName("ebs.csi.aws.com", "vol-1"); u != "kubernetes.io/csi/ebs.csi.aws.com^vol-1" {
		t.Errorf("UniqueVolumeName = %q", u)
	}
}

// Two nodes never share an attachment name for one volume.
func TestAttachmentNamePerNode(t *testing.T) {
	if AttachmentName("vol-0abc", "ebs.csi.aws.com", "node-a") == AttachmentName("vol-0abc", "ebs.csi.aws.com", "node-b") {
		t.Fatal("two nodes share an attachment name")
	}
}
