//! `init --task vision`: ten small PNG images of squares and circles, drawn here, and a
//! bench asking how many shapes each holds — with the image, and without it (`files:
//! none`), so the first run shows what the image is worth. Each image's `tEXt` chunk says
//! what it shows, which is what the simulator reads (a real model looks at the pixels).

use super::starter::{Starter, StarterFile};

/// The shapes of image `i` (1-based): squares, circles.
fn counts(i: usize) -> (usize, usize) {
    const COUNTS: [(usize, usize); 10] = [
        (2, 1),
        (3, 0),
        (1, 2),
        (4, 3),
        (2, 2),
        (1, 0),
        (3, 3),
        (2, 4),
        (1, 1),
        (4, 1),
    ];
    COUNTS[(i - 1) % COUNTS.len()]
}

pub(super) fn vision() -> Starter {
    let mut more_files = vec![StarterFile::new(
        "prompts/no-image.yaml",
        "# The same question without the image: `files: none` leaves a case's files out, so\n# the comparison with plain says what the image is worth.\nname: no-image\nfiles: none\nmessages:\n  - role: system\n    content: \"Answer with a number only.\"\n  - role: user\n    content: \"{{ question }}\"\n",
    )];
    let mut cases = Vec::new();
    for i in 1..=10 {
        let (squares, circles) = counts(i);
        let path = format!("images/shapes-{i:02}.png");
        more_files.push(StarterFile::new(&path, picture(i, squares, circles)));
        cases.push(format!(
            "{{\"id\": \"s-{i:02}\", \"vars\": {{\"question\": \"How many shapes are in the picture, squares and circles together?\"}}, \"files\": {{\"picture\": \"{path}\"}}, \"expected\": \"{}\"}}",
            squares + circles
        ));
    }
    Starter {
        grade: "{ kind: number, tolerance: 0 }  # the last number in the answer must equal `expected`",
        extra: "",
        cases,
        // plain.yaml names no file: the case's picture goes after its user message's text.
        plain: ("Answer with a number only.", "{{ question }}"),
        careful: (
            "Look at the picture closely. Count the squares, then the circles, step by step, and end with 'Answer: <number>'.",
            "{{ file(\"picture\") }}\n{{ question }}",
        ),
        more_variants: "  - prompts/no-image.yaml          # files: none, the same question without the image\n",
        more_files,
    }
}

/// A 160 × 96 RGB picture: red squares, then blue circles, on a light grid of cells.
fn picture(seed: usize, squares: usize, circles: usize) -> Vec<u8> {
    const W: usize = 160;
    const H: usize = 96;
    let mut pixels = vec![[246u8, 246, 240]; W * H];
    // Eight cells of 40 × 48; shapes take cells in an order the seed shuffles.
    let mut cells: Vec<usize> = (0..8).collect();
    cells.rotate_left(seed % 8);
    let mut paint = |cell: usize, square: bool| {
        let (cx, cy) = ((cell % 4) * 40 + 20, (cell / 4) * 48 + 24);
        for y in cy - 14..cy + 14 {
            for x in cx - 14..cx + 14 {
                let (dx, dy) = (x as i64 - cx as i64, y as i64 - cy as i64);
                if square && dx.abs() < 12 && dy.abs() < 12 {
                    pixels[y * W + x] = [214, 48, 49];
                } else if !square && dx * dx + dy * dy < 13 * 13 {
                    pixels[y * W + x] = [9, 132, 227];
                }
            }
        }
    };
    for (n, &cell) in cells.iter().take(squares + circles).enumerate() {
        paint(cell, n < squares);
    }
    let mut raw = Vec::with_capacity(H * (1 + W * 3));
    for row in pixels.chunks(W) {
        raw.push(0); // no filter
        raw.extend(row.iter().flatten());
    }
    let text = format!(
        "Comment\0{squares} + {circles} shapes: {squares} red squares and {circles} blue circles"
    );
    let mut header = Vec::new();
    header.extend((W as u32).to_be_bytes());
    header.extend((H as u32).to_be_bytes());
    header.extend([8, 2, 0, 0, 0]); // 8 bits, RGB
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut png, b"IHDR", &header);
    chunk(&mut png, b"tEXt", text.as_bytes());
    chunk(&mut png, b"IDAT", &zlib_stored(&raw));
    chunk(&mut png, b"IEND", &[]);
    png
}

fn chunk(png: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    png.extend((data.len() as u32).to_be_bytes());
    png.extend(kind);
    png.extend(data);
    let mut crc = crc32(kind, 0xffff_ffff);
    crc = crc32(data, crc);
    png.extend((!crc).to_be_bytes());
}

/// `data` as a zlib stream of stored (uncompressed) blocks: a valid PNG needs no more.
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = data.chunks(65_535).collect();
    for (n, block) in blocks.iter().enumerate() {
        out.push(u8::from(n + 1 == blocks.len()));
        let len = block.len() as u16;
        out.extend(len.to_le_bytes());
        out.extend((!len).to_le_bytes());
        out.extend(*block);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in data {
        a = (a + u32::from(byte)) % 65_521;
        b = (b + a) % 65_521;
    }
    out.extend(((b << 16) | a).to_be_bytes());
    out
}

/// CRC-32 (ISO 3309, as PNG's chunks use), continued from `crc`.
fn crc32(data: &[u8], mut crc: u32) -> u32 {
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pictures_are_pngs_a_decoder_reads_and_say_what_they_show() {
        // The check value of CRC-32 (the catalogue's "123456789").
        assert_eq!(!crc32(b"123456789", 0xffff_ffff), 0xcbf4_3926);
        let png = picture(3, 2, 1);
        let size = imagesize::blob_size(&png).unwrap();
        assert_eq!((size.width, size.height), (160, 96));
        assert_eq!(
            promptgauge_client::attachment::Kind::sniff(&png),
            Some(promptgauge_client::attachment::Kind::Png)
        );
        // The zlib stream inflates to the rows, its checksum checked (flate2's inflater).
        let idat_at = png.windows(4).position(|w| w == b"IDAT").unwrap();
        let len = u32::from_be_bytes(png[idat_at - 4..idat_at].try_into().unwrap()) as usize;
        let stream = &png[idat_at + 4..idat_at + 4 + len];
        let mut rows = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::ZlibDecoder::new(stream), &mut rows).unwrap();
        assert_eq!(rows.len(), 96 * (1 + 160 * 3));
        let pixels: Vec<&[u8]> = rows
            .chunks(1 + 160 * 3)
            .flat_map(|row| row[1..].chunks(3))
            .collect();
        let red = pixels.iter().filter(|p| **p == [214, 48, 49]).count();
        let blue = pixels.iter().filter(|p| **p == [9, 132, 227]).count();
        // Two squares of 23 × 23 pixels, one circle of radius 13 (π r² ≈ 531).
        assert_eq!(red, 2 * 23 * 23);
        assert!((500..560).contains(&blue), "{blue}");
        // Every case's count is what its picture draws, and some are zero circles.
        let all: Vec<(usize, usize)> = (1..=10).map(counts).collect();
        assert!(all.iter().all(|&(s, c)| s >= 1 && s + c <= 8));
        assert!(all.iter().any(|&(_, c)| c == 0));
    }
}
