from tuimon.sources.mounts import fstype_of, needs_polling, parse_mountinfo

MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:40 / /scratch rw,relatime shared:20 - lustre 10.0.0.1@o2ib:/scratch rw
31 22 0:41 / /home rw,relatime shared:21 - nfs4 srv:/home rw,vers=4.2
32 30 0:42 / /scratch/local\\040disk rw,relatime - xfs /dev/nvme0n1 rw
33 22 0:43 / /gpfs rw - gpfs gpfs0 rw
34 22 0:44 / /mnt/s3 rw - fuse.s3fs s3fs rw
35 22 0:45 / /weird rw - somethingnew dev rw
"""


def test_parse_mountinfo_unescapes_spaces():
    points = dict(parse_mountinfo(MOUNTINFO))
    assert points["/scratch/local disk"] == "xfs" and points["/home"] == "nfs4"


def test_longest_mount_point_wins_and_remote_types_are_polled():
    assert fstype_of("/scratch/run1/log.out", MOUNTINFO) == "lustre"
    assert fstype_of("/scratch/local disk/x.log", MOUNTINFO) == "xfs"
    assert needs_polling("/scratch/run/x.log", MOUNTINFO)
    assert needs_polling("/home/u/x.log", MOUNTINFO)
    assert needs_polling("/gpfs/x", MOUNTINFO) and needs_polling("/mnt/s3/x", MOUNTINFO)
    assert needs_polling("/weird/x", MOUNTINFO)  # unknown: poll
    assert not needs_polling("/var/log/x", MOUNTINFO)
    assert not needs_polling("/scratch/local disk/x.log", MOUNTINFO)
