// Package blockdev is the cloud's block layer on the machine: sparse volume files and the
// loop devices over them (attaching an EBS volume to an instance sets up a loop device).
//
// Loop sets up loop devices with the LOOP_* ioctls (LOOP_CTL_GET_FREE, LOOP_CONFIGURE,
// LOOP_SET_CAPACITY, LOOP_CLR_FD), grows files with truncate and copies them sparse-aware
// with SEEK_DATA/SEEK_HOLE and copy_file_range. It needs root. Fake does the same in memory
// for hollow mode and unit tests, and can be told to fail chosen operations.
//
// Contract: every method either does all it says or leaves nothing behind (a file that a
// failed CreateFile or CopyFile made is removed; a loop device that a failed Attach took is
// released). Attach never uses LO_FLAGS_AUTOCLEAR, so loop devices outlive the process that
// made them: attached volumes stay attached across restarts of the cloud.
package blockdev
