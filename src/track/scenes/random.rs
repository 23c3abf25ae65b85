//! Random scenes: objects wander (heading random walk, occasional speed changes), bounce off
//! the borders until their leaving time, then leave through the next border they reach; some
//! enter later through a border. *Convoys* are pairs riding side by side that close up into one
//! component for 0.4-1.1 s and part again. Occluders are full-height or full-width bars below
//! the threshold.

use super::{Noise, Occluder, Rng, Scene, SceneObject};

/// Parameters of a random scene (see the module docs).
#[derive(Clone, Debug)]
pub struct RandomSpec {
    /// Scene name.
    pub name: &'static str,
    /// Seed of everything random.
    pub seed: u64,
    /// Frame width, pixels.
    pub width: usize,
    /// Frame height, pixels.
    pub height: usize,
    /// Frames per second.
    pub fps: u32,
    /// Length, seconds.
    pub seconds: f64,
    /// Wandering objects (convoy partners come on top).
    pub objects: usize,
    /// Range of the semi-axes, pixels.
    pub radius: [f64; 2],
    /// Range of speeds, pixels a second.
    pub speed: [f64; 2],
    /// Standard deviation of the heading's random walk, radians per square-root second.
    pub turn: f64,
    /// Share of the objects that enter later through a border.
    pub entering: f64,
    /// Pairs riding side by side that close up into one component for a while.
    pub convoys: usize,
    /// Bars hiding the objects behind them.
    pub occluders: usize,
    /// Noise.
    pub noise: Noise,
}

impl Default for RandomSpec {
    fn default() -> Self {
        Self {
            name: "random",
            seed: 0,
            width: 480,
            height: 360,
            fps: 25,
            seconds: 12.0,
            objects: 8,
            radius: [7.0, 13.0],
            speed: [30.0, 100.0],
            turn: 0.6,
            entering: 0.4,
            convoys: 2,
            occluders: 1,
            noise: Noise {
                pixel: 6,
                specks: 150,
                clutter_per_second: 2.0,
            },
        }
    }
}

impl RandomSpec {
    /// Generates the scene.
    #[must_use]
    pub fn build(&self) -> Scene {
        let mut rng = Rng(self.seed.wrapping_mul(0x9e37_79b9).wrapping_add(17));
        let frames = (self.seconds * f64::from(self.fps)).round() as usize;
        let mut objects = Vec::new();
        for k in 0..self.objects {
            let object = self.wanderer(&mut rng, k, frames);
            objects.push(object);
        }
        for c in 0..self.convoys.min(self.objects) {
            let id = objects.len() as u64 + 1;
            let partner = self.partner(&mut rng, &objects[c], id, frames);
            objects.push(partner);
        }
        let occluders = (0..self.occluders)
            .map(|_| self.occluder(&mut rng))
            .collect();
        Scene {
            name: self.name.into(),
            width: self.width,
            height: self.height,
            fps: self.fps,
            frames,
            background: 8,
            objects,
            occluders,
            noise: self.noise,
            seed: self.seed,
        }
    }

    /// Object `k` (id `k + 1`) over the scene's `frames`: its size, grey, entering and leaving
    /// times and start, then its walk (heading random walk, occasional speed changes, bouncing
    /// off the borders until its leaving time) until it is out of the frame. The draws from
    /// `rng` come in a fixed order, so a seed gives one scene.
    fn wanderer(&self, rng: &mut Rng, k: usize, frames: usize) -> SceneObject {
        let (w, h) = (self.width as f64, self.height as f64);
        let dt = 1.0 / f64::from(self.fps);
        let rx = rng.range(self.radius[0], self.radius[1]);
        let r = [
            rx,
            (rx * rng.range(0.75, 1.3)).clamp(self.radius[0], self.radius[1]),
        ];
        let grey = 60 + rng.below(190) as u8;
        let enters = (k as f64) >= self.objects as f64 * (1.0 - self.entering);
        let t_enter = if enters {
            rng.below(frames * 6 / 10 + 1)
        } else {
            0
        };
        let t_leave = t_enter + (frames as f64 * rng.range(0.4, 1.3)) as usize;
        let mut speed = rng.range(self.speed[0], self.speed[1]);
        let (mut p, mut heading) = self.start(rng, enters, r);
        let mut inside = !enters;
        let mut gone = false;
        let mut path = vec![None; frames];
        for (f, slot) in path.iter_mut().enumerate().skip(t_enter) {
            if gone {
                break;
            }
            *slot = Some(p);
            heading += self.turn * dt.sqrt() * rng.normal();
            if rng.unit() < 0.3 * dt {
                speed = rng.range(self.speed[0], self.speed[1]);
            }
            let mut v = [speed * heading.cos() * dt, speed * heading.sin() * dt];
            let fully_in =
                p[0] >= r[0] && p[0] <= w - 1.0 - r[0] && p[1] >= r[1] && p[1] <= h - 1.0 - r[1];
            inside |= fully_in;
            if inside && f < t_leave {
                for a in 0..2 {
                    let hi = [w, h][a] - 1.0 - r[a];
                    if (p[a] + v[a] < r[a] && v[a] < 0.0) || (p[a] + v[a] > hi && v[a] > 0.0) {
                        v[a] = -v[a];
                    }
                }
                heading = v[1].atan2(v[0]);
            }
            p = [p[0] + v[0], p[1] + v[1]];
            gone = p[0] < -r[0] - 1.0 || p[0] > w + r[0] || p[1] < -r[1] - 1.0 || p[1] > h + r[1];
        }
        SceneObject {
            id: k as u64 + 1,
            radii: r,
            grey,
            path,
        }
    }

    /// Where an object of radii `r` starts, and its heading: just outside a random border,
    /// heading in, when it `enters`; else anywhere wholly inside, heading anywhere.
    fn start(&self, rng: &mut Rng, enters: bool, r: [f64; 2]) -> ([f64; 2], f64) {
        let (w, h) = (self.width as f64, self.height as f64);
        if enters {
            let side = rng.below(4);
            let along = rng.range(0.15, 0.85);
            let into = rng.range(-0.9, 0.9);
            match side {
                0 => ([-r[0], h * along], into),
                1 => ([w + r[0], h * along], std::f64::consts::PI + into),
                2 => ([w * along, -r[1]], std::f64::consts::FRAC_PI_2 + into),
                _ => ([w * along, h + r[1]], -std::f64::consts::FRAC_PI_2 + into),
            }
        } else {
            (
                [
                    rng.range(r[0] + 2.0, w - r[0] - 2.0),
                    rng.range(r[1] + 2.0, h - r[1] - 2.0),
                ],
                rng.range(0.0, std::f64::consts::TAU),
            )
        }
    }

    /// A convoy partner (id `id`) of `lead`: a round object riding beside it at a fixed angle,
    /// closing up into one component for 0.4-1.1 s (ramping in and out over 0.6 s) somewhere in
    /// the lead's lifetime and parting again.
    fn partner(&self, rng: &mut Rng, lead: &SceneObject, id: u64, frames: usize) -> SceneObject {
        let (w, h) = (self.width as f64, self.height as f64);
        let rb = rng.range(self.radius[0], self.radius[1]);
        let reach = lead.radii[0].max(lead.radii[1]) + rb;
        let lifetime: Vec<usize> = (0..frames).filter(|&f| lead.path[f].is_some()).collect();
        let (first, last) = (
            lifetime.first().copied().unwrap_or(0),
            lifetime.last().copied().unwrap_or(0),
        );
        let glued = (rng.range(0.4, 1.1) * f64::from(self.fps)) as usize;
        let ramp = (0.6 * f64::from(self.fps)) as usize;
        let t0 = first + ramp + rng.below((last.saturating_sub(first + glued + 3 * ramp)).max(1));
        let angle = rng.range(0.0, std::f64::consts::TAU);
        let distance = |f: usize| -> f64 {
            let (far, near) = (2.6 * reach, 0.8 * reach);
            let s = if f + ramp < t0 || f > t0 + glued + ramp {
                0.0
            } else if f < t0 {
                1.0 - (t0 - f) as f64 / ramp as f64
            } else if f <= t0 + glued {
                1.0
            } else {
                1.0 - (f - t0 - glued) as f64 / ramp as f64
            };
            far + s * (near - far)
        };
        // The partner stays in the frame while its lead is wholly in it (pressed against
        // the border rather than leaving and coming back).
        let [lx, ly] = lead.radii;
        let path = (0..frames)
            .map(|f| {
                lead.path[f].map(|p| {
                    let q = [
                        p[0] + distance(f) * angle.cos(),
                        p[1] + distance(f) * angle.sin(),
                    ];
                    let lead_in =
                        p[0] >= lx && p[0] <= w - 1.0 - lx && p[1] >= ly && p[1] <= h - 1.0 - ly;
                    if lead_in {
                        [q[0].clamp(rb, w - 1.0 - rb), q[1].clamp(rb, h - 1.0 - rb)]
                    } else {
                        q
                    }
                })
            })
            .collect();
        SceneObject {
            id,
            radii: [rb, rb],
            grey: 60 + rng.below(190) as u8,
            path,
        }
    }

    /// An occluder below the threshold: a bar 16-40 pixels thick, full-height (7 times in 10) or
    /// full-width, placed in the middle 70 % of the frame.
    fn occluder(&self, rng: &mut Rng) -> Occluder {
        let (w, h) = (self.width as f64, self.height as f64);
        let thick = rng.range(16.0, 40.0) as usize;
        if rng.unit() < 0.7 {
            let x = rng.range(0.15 * w, 0.85 * w) as usize;
            Occluder {
                rect: [x, 0, x + thick, self.height - 1],
                grey: 20,
            }
        } else {
            let y = rng.range(0.15 * h, 0.85 * h) as usize;
            Occluder {
                rect: [0, y, self.width - 1, y + thick],
                grey: 20,
            }
        }
    }
}
