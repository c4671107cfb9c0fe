! fortran_reader — an IOR-like segmented reader written in Fortran, for the layer's
! Fortran entry points (Open MPI's Fortran bindings call PMPI_* directly). The file holds
! SEGMENTS segments of `size` blocks of BLOCK bytes; rank r reads block r of every
! segment five ways, each into the whole buffer, and writes the buffer after each to
! DIR/rank<r>.bin:
!   (a) MPI_File_read_at per block (explicit offsets)
!   (b) a vector file view of the rank's blocks, one MPI_File_read_all
!   (c) MPI_File_seek to 0, MPI_File_read (individual pointer), MPI_File_get_position
!   (d) MPI_File_iread_at at view offset 0, MPI_Wait
!   (e) the byte view again, MPI_File_read_ordered per segment (shared pointer)
! Every read's MPI_Get_count is checked. Built twice: with `use mpi` (the mpif.h-style
! bindings) and, with -DF08, `use mpi_f08`.
!
!   fortran_reader FILE BLOCK SEGMENTS DIR
program fortran_reader
#ifdef F08
  use mpi_f08
#else
  use mpi
#endif
  implicit none
#ifdef F08
  type(MPI_File) :: fh
  type(MPI_Datatype) :: ftype
  type(MPI_Status) :: st
  type(MPI_Request) :: req
#else
  integer :: fh, ftype, req
  integer :: st(MPI_STATUS_SIZE)
#endif
  integer :: ierr, rank, nprocs, s, block, segments, unit, total
  integer(kind=MPI_OFFSET_KIND) :: off, disp, pos
  character(len=4096) :: path, arg, dump
  character, allocatable :: buf(:), seg(:)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  if (command_argument_count() /= 4) then
    if (rank == 0) print '(A)', 'usage: fortran_reader FILE BLOCK SEGMENTS DIR'
    call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  end if
  call get_command_argument(1, path)
  call get_command_argument(2, arg)
  read (arg, *) block
  call get_command_argument(3, arg)
  read (arg, *) segments
  call get_command_argument(4, dump)
  total = block * segments
  allocate (buf(total), seg(block))
  call MPI_File_open(MPI_COMM_WORLD, trim(path), MPI_MODE_RDONLY, MPI_INFO_NULL, fh, ierr)
  if (ierr /= MPI_SUCCESS) call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  write (arg, '(A,"/rank",I0,".bin")') trim(dump), rank
  open (newunit=unit, file=trim(arg), access='stream', form='unformatted', status='replace')

  ! (a) explicit offsets
  do s = 0, segments - 1
    off = (int(s, MPI_OFFSET_KIND) * nprocs + rank) * block
    call MPI_File_read_at(fh, off, seg, block, MPI_BYTE, st, ierr)
    call check(st, block)
    buf(s * block + 1:(s + 1) * block) = seg
  end do
  write (unit) buf

  ! (b) a vector view of the rank's blocks, one collective read
  call MPI_Type_vector(segments, block, nprocs * block, MPI_BYTE, ftype, ierr)
  call MPI_Type_commit(ftype, ierr)
  disp = int(rank, MPI_OFFSET_KIND) * block
  call MPI_File_set_view(fh, disp, MPI_BYTE, ftype, 'native', MPI_INFO_NULL, ierr)
  buf = achar(0)
  call MPI_File_read_all(fh, buf, total, MPI_BYTE, st, ierr)
  call check(st, total)
  write (unit) buf

  ! (c) the individual pointer
  call MPI_File_seek(fh, 0_MPI_OFFSET_KIND, MPI_SEEK_SET, ierr)
  buf = achar(0)
  call MPI_File_read(fh, buf, total, MPI_BYTE, st, ierr)
  call check(st, total)
  call MPI_File_get_position(fh, pos, ierr)
  if (pos /= int(total, MPI_OFFSET_KIND)) then
    print '(A,I0)', 'error: position ', pos
    call MPI_Abort(MPI_COMM_WORLD, 3, ierr)
  end if
  write (unit) buf

  ! (d) nonblocking, at view offset 0
  buf = achar(0)
  call MPI_File_iread_at(fh, 0_MPI_OFFSET_KIND, buf, total, MPI_BYTE, req, ierr)
  call MPI_Wait(req, st, ierr)
  call check(st, total)
  write (unit) buf

  ! (e) the byte view, ordered reads: block r of each segment
  call MPI_File_set_view(fh, 0_MPI_OFFSET_KIND, MPI_BYTE, MPI_BYTE, 'native', MPI_INFO_NULL, ierr)
  do s = 0, segments - 1
    call MPI_File_read_ordered(fh, seg, block, MPI_BYTE, MPI_STATUS_IGNORE, ierr)
    buf(s * block + 1:(s + 1) * block) = seg
  end do
  write (unit) buf

  close (unit)
  call MPI_Type_free(ftype, ierr)
  call MPI_File_close(fh, ierr)
  call MPI_Finalize(ierr)

contains

  subroutine check(status, n)
#ifdef F08
    type(MPI_Status), intent(in) :: status
#else
    integer, intent(in) :: status(MPI_STATUS_SIZE)
#endif
    integer, intent(in) :: n
    integer :: got, e
    call MPI_Get_count(status, MPI_BYTE, got, e)
    if (got /= n) then
      print '(A,I0,A,I0)', 'error: read ', got, ' bytes, expected ', n
      call MPI_Abort(MPI_COMM_WORLD, 3, e)
    end if
  end subroutine check

end program fortran_reader
